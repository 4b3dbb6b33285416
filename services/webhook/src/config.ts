// The webhook's settings from the environment, checked at start: a bad one stops the
// service with the variable named.
import { envBool, envString, readPem, type Env } from "@ephemera/kit";
import type { InjectOptions } from "./inject/inject.js";
import type { WebhookTarget } from "./register/configuration.js";

export const DEFAULT_WEBHOOK_LISTEN = "127.0.0.1:7781";
/** The router of the same release: the workspace's version (a test holds them together). */
export const DEFAULT_ROUTER_IMAGE = "ephemera/router:0.1.0";
/** The Routes API's alias Service in ephemera's namespace (deploy/). */
export const DEFAULT_ROUTES = "routeserver.ephemera-system.svc:7777";
export const DEFAULT_OWN_NAMESPACE = "ephemera-system";

export interface WebhookConfig {
  listen: string;
  /** The serving certificate and key from files; absent, a CA and certificate are made at start. */
  tls?: { cert: string; key: string };
  /** The CA to register when the certificate is given (EPHEMERA_WEBHOOK_CA); absent, the API server's trust roots. */
  caBundle?: string;
  /** The names on a certificate made at start. */
  hosts: string[];
  inject: InjectOptions;
  /** Whether to write the MutatingWebhookConfiguration at start, and where it sends the API server. */
  register?: { target?: WebhookTarget; excludeNamespaces: string[] };
}

const NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

function serviceTarget(text: string): WebhookTarget {
  const m = /^([^/\s]+)\/([^:\s]+)(?::(\d+))?$/.exec(text);
  const port = Number(m?.[3] ?? 443);
  if (!m || !NAME.test(m[1]!) || !NAME.test(m[2]!) || port < 1 || port > 65535) {
    throw new Error(`EPHEMERA_WEBHOOK_SERVICE must be namespace/name[:port] of the webhook's Service (e.g. ephemera-system/webhook:443), got "${text}"`);
  }
  return { service: { namespace: m[1]!, name: m[2]!, port } };
}

function urlTarget(text: string): WebhookTarget {
  let url: URL;
  try { url = new URL(text); } catch { throw new Error(`EPHEMERA_WEBHOOK_URL must be an https:// URL, got "${text}"`); }
  if (url.protocol !== "https:" || url.username || url.password || url.search || url.hash) {
    throw new Error(`EPHEMERA_WEBHOOK_URL must be an https:// URL without user, query or fragment (the API server calls webhooks so), got "${text}"`);
  }
  return { url: text };
}

export function webhookConfig(env: Env): WebhookConfig {
  const listen = envString(env, "EPHEMERA_WEBHOOK_LISTEN", DEFAULT_WEBHOOK_LISTEN);
  const certPath = envString(env, "EPHEMERA_WEBHOOK_TLS_CERT", "");
  const keyPath = envString(env, "EPHEMERA_WEBHOOK_TLS_KEY", "");
  const caPath = envString(env, "EPHEMERA_WEBHOOK_CA", "");
  if (!certPath !== !keyPath) throw new Error("EPHEMERA_WEBHOOK_TLS_CERT and EPHEMERA_WEBHOOK_TLS_KEY go together; one of them is empty");
  if (caPath && !certPath) throw new Error("EPHEMERA_WEBHOOK_CA names the CA of a given certificate: set EPHEMERA_WEBHOOK_TLS_CERT and EPHEMERA_WEBHOOK_TLS_KEY too (without them the webhook makes its own CA)");
  const listenHost = listen.slice(0, listen.lastIndexOf(":")).replace(/^\[(.*)\]$/, "$1");
  const hosts = envString(env, "EPHEMERA_WEBHOOK_HOSTS", "").split(",").map((h) => h.trim()).filter(Boolean);
  const url = envString(env, "EPHEMERA_WEBHOOK_URL", "");
  const service = envString(env, "EPHEMERA_WEBHOOK_SERVICE", "");
  if (url && service) throw new Error("EPHEMERA_WEBHOOK_URL and EPHEMERA_WEBHOOK_SERVICE both say where the API server calls the webhook: set one");
  const target = url ? urlTarget(url) : service ? serviceTarget(service) : undefined;
  const tokenSecret = envString(env, "EPHEMERA_ROUTER_TOKEN_SECRET", "");
  const [secretName, secretKey, ...rest] = tokenSecret.split("/");
  if (tokenSecret && (rest.length || !secretName || !secretKey)) throw new Error(`EPHEMERA_ROUTER_TOKEN_SECRET must be name/key of a Secret in each injected namespace, got "${tokenSecret}"`);
  return {
    listen,
    ...(certPath ? { tls: { cert: readPem("EPHEMERA_WEBHOOK_TLS_CERT", certPath, "CERTIFICATE"), key: readPem("EPHEMERA_WEBHOOK_TLS_KEY", keyPath, "PRIVATE KEY") } } : {}),
    ...(caPath ? { caBundle: readPem("EPHEMERA_WEBHOOK_CA", caPath, "CERTIFICATE") } : {}),
    hosts: hosts.length ? hosts : [...new Set(["localhost", "127.0.0.1", ...(["0.0.0.0", "::", ""].includes(listenHost) ? [] : [listenHost])])],
    inject: {
      image: envString(env, "EPHEMERA_ROUTER_IMAGE", DEFAULT_ROUTER_IMAGE),
      routes: envString(env, "EPHEMERA_ROUTES", DEFAULT_ROUTES),
      ...(tokenSecret ? { tokenSecret: { name: secretName!, key: secretKey! } } : {}),
    },
    ...(envBool(env, "EPHEMERA_WEBHOOK_REGISTER", false)
      ? { register: { ...(target ? { target } : {}), excludeNamespaces: [envString(env, "EPHEMERA_WEBHOOK_NAMESPACE", DEFAULT_OWN_NAMESPACE)] } }
      : {}),
  };
}
