// The webhook as a process: configuration from the environment, then startWebhook().
import { configured, createLogger, onShutdown } from "@ephemera/kit";
import { webhookConfig } from "./config.js";
import { startWebhook } from "./start.js";

const logger = createLogger("webhook");
const config = configured(logger, "webhook", () => webhookConfig(process.env));

try {
  const webhook = await startWebhook(config, { logger });
  onShutdown(logger, [() => webhook.stop()]);
} catch (err) {
  logger.fatal({ err }, "webhook failed to start");
  process.exit(1);
}
