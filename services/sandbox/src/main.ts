// Entry point of the sandbox service (the public API).
import { tmpdir } from "node:os";
import {
  DEFAULT_API_LISTEN, DEFAULT_GATEWAY_LISTEN, DEFAULT_JOBS_LISTEN, DEFAULT_ROUTES_HTTP_LISTEN, DEFAULT_ROUTES_LISTEN, commonConfig, configured, createLogger,
  defaultSigningKeyFile, envBool, envDuration, envInt, envString, onShutdown, serverTlsFromEnv, signingKeys,
} from "@ephemera/kit";
import { metricsListen, serviceRegistry, startMetricsServer } from "@ephemera/kit/metrics";
import { DEFAULT_ADMISSION, DEFAULT_TUNNEL_CHECK, apiAccess, apiAccessConfigFromEnv, start } from "./index.js";

/** EPHEMERA_LOCALS_CHECK: how often each connected local's tunnel is asked; an answer may take 2 s (less when checked more often). */
function localsCheck() {
  const intervalMs = envDuration(process.env, "EPHEMERA_LOCALS_CHECK", "5s", { minMs: 100, maxMs: 300_000 });
  return { ...DEFAULT_TUNNEL_CHECK, intervalMs, timeoutMs: Math.min(DEFAULT_TUNNEL_CHECK.timeoutMs, intervalMs) };
}

const logger = createLogger("sandbox");
const config = configured(logger, "sandbox service", () => {
  const common = commonConfig(process.env);
  return {
    ...common,
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
    // Creates wait under a burst while this many sandboxes of their cluster are created and not yet started (0: never).
    admission: {
      waiting: envInt(process.env, "EPHEMERA_ADMISSION_WAITING", DEFAULT_ADMISSION.waiting),
      timeoutMs: envDuration(process.env, "EPHEMERA_ADMISSION_TIMEOUT", "60s", { minMs: 0, maxMs: 3_600_000 }),
    },
    // The job runner groups' pods; their tokens are signed with the runner's key (the same key file on one machine).
    jobs: {
      listen: envString(process.env, "EPHEMERA_JOBS_LISTEN", DEFAULT_JOBS_LISTEN),
      keys: signingKeys(process.env, defaultSigningKeyFile(tmpdir(), common.prefix)),
      // One artifact's size bound, in bytes (docs/jobs.md, Artifacts).
      artifactMaxBytes: envInt(process.env, "EPHEMERA_JOB_ARTIFACT_MAX", 64 * 1024 * 1024),
    },
  };
});
const metrics = serviceRegistry("sandbox");
Promise.all([start({ ...config, metrics }, logger), startMetricsServer(config.metricsListen, metrics, logger)]).then(
  // Closed in reverse: the service first, its metrics last.
  ([service, server]) => onShutdown(logger, [() => server.stop(), () => service.stop()]),
  (err: unknown) => { logger.fatal({ err }, "sandbox service failed to start"); process.exit(1); },
);
