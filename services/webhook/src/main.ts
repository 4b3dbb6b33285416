// The webhook as a process: configuration from the environment, then startWebhook().
import { configured, createLogger, onShutdown } from "@ephemera/kit";
import { metricsListen, serviceRegistry, startMetricsServer } from "@ephemera/kit/metrics";
import { webhookConfig } from "./config.js";
import { WebhookMetrics } from "./server/metrics.js";
import { startWebhook } from "./start.js";

const logger = createLogger("webhook");
const config = configured(logger, "webhook", () => webhookConfig(process.env));
const registry = serviceRegistry("webhook");

try {
  const metricsServer = await startMetricsServer(metricsListen(process.env, "webhook"), registry, logger);
  const webhook = await startWebhook(config, { logger, metrics: new WebhookMetrics(registry) });
  onShutdown(logger, [() => metricsServer.stop(), () => webhook.stop()]);
} catch (err) {
  logger.fatal({ err }, "webhook failed to start");
  process.exit(1);
}
