// startWebhook: the server on its certificate (given, or made now), then, when asked, the
// MutatingWebhookConfiguration that points the cluster at it. main.ts and the tests start it here.
import { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "@ephemera/kit";
import { makeCerts } from "./certs/certs.js";
import type { WebhookConfig } from "./config.js";
import { CONFIGURATION_NAME, webhookConfiguration, type WebhookTarget } from "./register/configuration.js";
import { registerWebhook } from "./register/register.js";
import type { WebhookMetrics } from "./server/metrics.js";
import { MUTATE_PATH } from "./server/paths.js";
import { startWebhookServer, type WebhookServer } from "./server/server.js";

export interface RunningWebhook extends WebhookServer {
  /** The CA the API server is to trust (PEM), undefined when a given certificate chains to the system's roots. */
  caBundle: string | undefined;
  /** Where the cluster was told to call, when the webhook registered itself. */
  registered?: WebhookTarget;
}

export async function startWebhook(config: WebhookConfig, deps: { logger: Logger; kubeconfig?: KubeConfig; metrics?: WebhookMetrics }): Promise<RunningWebhook> {
  const made = config.tls ? undefined : await makeCerts(config.hosts);
  const tls = config.tls ?? made!;
  const caBundle = made ? made.ca : config.caBundle;
  const server = await startWebhookServer({ listen: config.listen, tls, inject: config.inject, logger: deps.logger, ...(deps.metrics ? { metrics: deps.metrics } : {}) });
  deps.logger.info({ url: server.url, certificate: made ? `made at start for ${config.hosts.join(", ")}` : "from EPHEMERA_WEBHOOK_TLS_CERT" }, "webhook listening");
  if (!config.register) return { ...server, caBundle };
  try {
    const target = config.register.target ?? ownUrl(server.url);
    const kubeconfig = deps.kubeconfig ?? defaultKubeconfig();
    await registerWebhook(kubeconfig, webhookConfiguration({ target, ...(caBundle ? { caBundle } : {}), excludeNamespaces: config.register.excludeNamespaces }));
    deps.logger.info({ configuration: CONFIGURATION_NAME, target, cluster: kubeconfig.getCurrentCluster()?.server }, "webhook registered");
    return { ...server, caBundle, registered: target };
  } catch (err) {
    await server.stop();
    throw err;
  }
}

function ownUrl(serverUrl: string): WebhookTarget {
  const host = new URL(serverUrl).hostname.replace(/^\[|\]$/g, "");
  if (["0.0.0.0", "::"].includes(host)) {
    throw new Error("EPHEMERA_WEBHOOK_REGISTER: the webhook listens on every address, so set EPHEMERA_WEBHOOK_URL or EPHEMERA_WEBHOOK_SERVICE to say where the API server reaches it");
  }
  return { url: `${serverUrl}${MUTATE_PATH}` };
}

function defaultKubeconfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  return kc;
}
