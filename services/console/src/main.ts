// Entry point of the console: the web page and its facade over the public API.
import { configured, createLogger, onShutdown } from "@ephemera/kit";
import { consoleConfig } from "./config.js";
import { startConsole } from "./server.js";

const logger = createLogger("console");
const config = configured(logger, "console", () => consoleConfig(process.env));

try {
  const running = await startConsole({ ...config, logger });
  logger.info({ url: running.address }, "console ready");
  onShutdown(logger, [() => running.close()]);
} catch (err) {
  logger.fatal({ err }, "console failed to start");
  process.exit(1);
}
