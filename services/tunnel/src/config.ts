// The tunnel service's settings, from the environment (docs/tunnel.md lists them).
import {
  DEFAULT_API_LISTEN, clientTlsFromEnv, commonConfig, envBool, envDuration, envString, serverTlsFromEnv, type ClientTls, type CommonConfig, type Env,
  type ServerTls,
} from "@ephemera/kit";
import { hostname } from "node:os";
import type { Liveness } from "./liveness.js";

export const DEFAULT_TUNNEL_LISTEN = "127.0.0.1:7785";

export interface TunnelConfig extends CommonConfig {
  /** EPHEMERA_TUNNEL_LISTEN. */
  listen: string;
  /** EPHEMERA_TUNNEL_POD_ADDRESS: the IP the cluster reaches the local workloads' listeners at. */
  podAddress: string;
  /** EPHEMERA_API: where LocalService.Serve is asked; EPHEMERA_TLS_CA etc.: how. */
  api: string;
  apiTls?: ClientTls;
  /** EPHEMERA_TLS_CERT and EPHEMERA_TLS_KEY, as the API's; absent: h2c. */
  tls?: ServerTls;
  /** EPHEMERA_TUNNEL_REFRESH: how often each session re-asks the API. */
  refreshMs: number;
  /** EPHEMERA_TUNNEL_PING and EPHEMERA_TUNNEL_PING_TIMEOUT. */
  liveness: Liveness;
  /** EPHEMERA_TUNNEL_ACCEPT_TIMEOUT: how long a cluster connection waits for the workstation. */
  acceptTimeoutMs: number;
  /** EPHEMERA_TUNNEL_DNS: the cluster's name servers for dial targets; empty: the system's resolver. */
  dns: string[];
  /** EPHEMERA_TUNNEL_NAMESPACES: whose Services /v1/services lists; empty: every namespace. */
  namespaces: string[];
  /** This replica's name (EPHEMERA_TUNNEL_NAME, else the host name: the pod's). */
  name: string;
  /** EPHEMERA_API_ALLOW_OPEN: serve on an address other machines reach though the API has no tokens. */
  allowOpen: boolean;
}

const list = (text: string) => text.split(",").map((s) => s.trim()).filter(Boolean);

/** The listen address's host, unless it is every address (then loopback): where listeners for the cluster go by default. */
function defaultPodAddress(listen: string): string {
  const host = listen.slice(0, listen.lastIndexOf(":")).replace(/^\[|\]$/g, "");
  return !host || host === "0.0.0.0" || host === "::" || host === "localhost" ? "127.0.0.1" : host;
}

export function tunnelConfig(env: Env): TunnelConfig {
  const listen = envString(env, "EPHEMERA_TUNNEL_LISTEN", DEFAULT_TUNNEL_LISTEN);
  const seconds = { minMs: 10, maxMs: 3_600_000 };
  const apiTls = clientTlsFromEnv(env);
  const tls = serverTlsFromEnv(env);
  return {
    ...commonConfig(env),
    listen,
    podAddress: envString(env, "EPHEMERA_TUNNEL_POD_ADDRESS", "") || defaultPodAddress(listen),
    api: envString(env, "EPHEMERA_API", DEFAULT_API_LISTEN),
    ...(apiTls ? { apiTls } : {}),
    ...(tls ? { tls } : {}),
    refreshMs: envDuration(env, "EPHEMERA_TUNNEL_REFRESH", "5s", seconds),
    liveness: {
      intervalMs: envDuration(env, "EPHEMERA_TUNNEL_PING", "2s", seconds),
      timeoutMs: envDuration(env, "EPHEMERA_TUNNEL_PING_TIMEOUT", "5s", seconds),
    },
    acceptTimeoutMs: envDuration(env, "EPHEMERA_TUNNEL_ACCEPT_TIMEOUT", "10s", seconds),
    dns: list(envString(env, "EPHEMERA_TUNNEL_DNS", "")),
    namespaces: list(envString(env, "EPHEMERA_TUNNEL_NAMESPACES", "")),
    name: envString(env, "EPHEMERA_TUNNEL_NAME", "") || hostname(),
    allowOpen: envBool(env, "EPHEMERA_API_ALLOW_OPEN", false),
  };
}
