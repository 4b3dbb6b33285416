// Entry point of the tunnel service: workstations' sessions, the cluster's connections to
// their local workloads and theirs to the cluster's Services.
import { existsSync } from "node:fs";
import { KubeConfig } from "@kubernetes/client-node";
import { JetStreamEventStore, connectNats } from "@ephemera/eventstore";
import { configured, createLogger, onShutdown } from "@ephemera/kit";
import { metricsListen, serviceRegistry, startMetricsServer } from "@ephemera/kit/metrics";
import { tunnelConfig } from "./config.js";
import { apiAuthorizer, refuseOpenApiElsewhere } from "./server/authorize.js";
import { TunnelMetrics } from "./server/metrics.js";
import { kubeServices } from "./server/services.js";
import { kubeEnvironment } from "./server/kube-environment.js";
import { startTunnel } from "./start.js";

const logger = createLogger("tunnel");
const config = configured(logger, "tunnel service", () => tunnelConfig(process.env));
const registry = serviceRegistry("tunnel");

/** A kubeconfig when there is one to see the cluster with: KUBECONFIG, or the pod's service account. */
function kubeconfig(): KubeConfig | undefined {
  const named = process.env["KUBECONFIG"];
  const inCluster = !!process.env["KUBERNETES_SERVICE_HOST"] && existsSync("/var/run/secrets/kubernetes.io/serviceaccount/token");
  if (!named && !inCluster) return undefined;
  const kc = new KubeConfig();
  kc.loadFromDefault();
  return kc;
}

try {
  const nc = await connectNats(config.natsUrl, "ephemera-tunnel", config.natsAuth);
  const store = await JetStreamEventStore.open(nc, { prefix: config.prefix, logger, replicas: config.streamReplicas });
  const api = apiAuthorizer(config.api, config.apiTls);
  const kc = kubeconfig();
  const metricsServer = await startMetricsServer(metricsListen(process.env, "tunnel"), registry, logger);
  const tunnel = await startTunnel(config, {
    store, authorize: refuseOpenApiElsewhere(api.authorize, config.listen, config.allowOpen), logger, metrics: new TunnelMetrics(registry),
    ...(kc ? { listServices: kubeServices(kc, config.namespaces), readEnvironment: kubeEnvironment(kc) } : {}),
  });
  if (!config.tls) logger.info("tunnel without a certificate (EPHEMERA_TLS_CERT): h2c, for a tunnel on this machine only");
  // Closed in reverse: sessions first (their events written), then the API client, NATS and metrics.
  onShutdown(logger, [() => metricsServer.stop(), async () => { await nc.drain(); }, () => api.close(), () => store.close(), () => tunnel.stop()]);
} catch (err) {
  logger.fatal({ err }, "tunnel service failed to start");
  process.exit(1);
}
