// Entry point of the sandbox service (the public API).
import {
  DEFAULT_API_LISTEN, DEFAULT_GATEWAY_LISTEN, DEFAULT_ROUTES_HTTP_LISTEN, DEFAULT_ROUTES_LISTEN, commonConfig, configured, createLogger, envBool, envDuration,
  envString, onShutdown, serverTlsFromEnv,
} from "@ephemera/kit";
import { metricsListen, serviceRegistry, startMetricsServer } from "@ephemera/kit/metrics";
import { DEFAULT_TUNNEL_CHECK, apiAccess, apiAccessConfigFromEnv, start } from "./index.js";

/** EPHEMERA_LOCALS_CHECK: how often each connected local's tunnel is asked; an answer may take 2 s (less when checked more often). */
function localsCheck() {
  const intervalMs = envDuration(process.env, "EPHEMERA_LOCALS_CHECK", "5s", { minMs: 100, maxMs: 300_000 });
  return { ...DEFAULT_TUNNEL_CHECK, intervalMs, timeoutMs: Math.min(DEFAULT_TUNNEL_CHECK.timeoutMs, intervalMs) };
}

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
  localsCheck: localsCheck(),
}));
const metrics = serviceRegistry("sandbox");
Promise.all([start({ ...config, metrics }, logger), startMetricsServer(config.metricsListen, metrics, logger)]).then(
  // Closed in reverse: the service first, its metrics last.
  ([service, server]) => onShutdown(logger, [() => server.stop(), () => service.stop()]),
  (err: unknown) => { logger.fatal({ err }, "sandbox service failed to start"); process.exit(1); },
);
