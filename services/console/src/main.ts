// Entry point of the console: the web page and its facade over the public API.
import { configured, createLogger, onShutdown } from "@ephemera/kit";
import { metricsListen, serviceRegistry, startMetricsServer } from "@ephemera/kit/metrics";
import { consoleConfig } from "./config.js";
import { startConsole } from "./server.js";

const logger = createLogger("console");
const config = configured(logger, "console", () => consoleConfig(process.env));

try {
  // Its process metrics (memory, event-loop lag): what open streams cost shows there.
  const metrics = await startMetricsServer(metricsListen(process.env, "console"), serviceRegistry("console"), logger);
  const running = await startConsole({ ...config, logger });
  logger.info({ url: running.address }, "console ready");
  onShutdown(logger, [() => metrics.stop(), () => running.close()]);
} catch (err) {
  logger.fatal({ err }, "console failed to start");
  process.exit(1);
}
