// Entry point of the scheduler service.
import { commonConfig, configured, createLogger, envString, onShutdown } from "@ephemera/kit";
import { metricsListen, serviceRegistry, startMetricsServer } from "@ephemera/kit/metrics";
import { start } from "./index.js";

const logger = createLogger("scheduler");
const config = configured(logger, "scheduler", () => ({
  ...commonConfig(process.env), listen: envString(process.env, "EPHEMERA_SCHEDULER_LISTEN", "127.0.0.1:7402"),
  metricsListen: metricsListen(process.env, "scheduler"),
}));
const metrics = serviceRegistry("scheduler");
Promise.all([start({ ...config, metrics }, logger), startMetricsServer(config.metricsListen, metrics, logger)]).then(
  // Closed in reverse: the service first, its metrics last.
  ([service, server]) => onShutdown(logger, [() => server.stop(), () => service.stop()]),
  (err: unknown) => { logger.fatal({ err }, "scheduler failed to start"); process.exit(1); },
);
