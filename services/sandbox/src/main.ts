// Entry point of the sandbox service (the public API).
import { DEFAULT_API_LISTEN, DEFAULT_GATEWAY_LISTEN, DEFAULT_ROUTES_HTTP_LISTEN, DEFAULT_ROUTES_LISTEN, commonConfig, configured, createLogger, envBool, envString, onShutdown, serverTlsFromEnv } from "@ephemera/kit";
import { metricsListen, serviceRegistry, startMetricsServer } from "@ephemera/kit/metrics";
import { apiAccess, apiAccessConfigFromEnv, start } from "./index.js";

const logger = createLogger("sandbox");
const config = configured(logger, "sandbox service", () => ({
  ...commonConfig(process.env),
  listen: envString(process.env, "EPHEMERA_API_LISTEN", DEFAULT_API_LISTEN),
  previewDomain: envString(process.env, "EPHEMERA_PREVIEW_DOMAIN", "preview.ephemera.localhost"),
  access: apiAccess(apiAccessConfigFromEnv(process.env)),
  allowOpen: envBool(process.env, "EPHEMERA_API_ALLOW_OPEN", false),
  tls: serverTlsFromEnv(process.env),
  metricsListen: metricsListen(process.env, "sandbox"),
  routes: {
    listen: envString(process.env, "EPHEMERA_ROUTES_LISTEN", DEFAULT_ROUTES_LISTEN),
    httpListen: envString(process.env, "EPHEMERA_ROUTES_HTTP_LISTEN", DEFAULT_ROUTES_HTTP_LISTEN),
  },
  gateway: {
    listen: envString(process.env, "EPHEMERA_GATEWAY_LISTEN", DEFAULT_GATEWAY_LISTEN),
    dns: envString(process.env, "EPHEMERA_GATEWAY_DNS", "").split(",").map((s) => s.trim()).filter(Boolean),
  },
}));
const metrics = serviceRegistry("sandbox");
Promise.all([start({ ...config, metrics }, logger), startMetricsServer(config.metricsListen, metrics, logger)]).then(
  // Closed in reverse: the service first, its metrics last.
  ([service, server]) => onShutdown(logger, [() => server.stop(), () => service.stop()]),
  (err: unknown) => { logger.fatal({ err }, "sandbox service failed to start"); process.exit(1); },
);
