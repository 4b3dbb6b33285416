// Entry point of the scheduler service.
import { commonConfig, configured, createLogger, envString, onShutdown } from "@ephemera/kit";
import { start } from "./index.js";

const logger = createLogger("scheduler");
const config = configured(logger, "scheduler", () => ({
  ...commonConfig(process.env), listen: envString(process.env, "EPHEMERA_SCHEDULER_LISTEN", "127.0.0.1:7402"),
}));
start(config, logger).then(
  (service) => onShutdown(logger, [() => service.stop()]),
  (err: unknown) => { logger.fatal({ err }, "scheduler failed to start"); process.exit(1); },
);
