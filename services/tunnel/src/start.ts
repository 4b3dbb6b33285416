// startTunnel: the tunnel service on its listen address, with what it needs handed in (the
// event store, the API's answer to who may serve what, the cluster's Services). main.ts and
// the tests start it here.
import { clusterLookup, type Logger } from "@ephemera/kit";
import type { EventStore } from "@ephemera/eventstore";
import type { Liveness } from "./liveness.js";
import { Audit } from "./server/audit.js";
import type { Authorize } from "./server/authorize.js";
import type { TunnelMetrics } from "./server/metrics.js";
import { noServices, type ListServices } from "./server/services.js";
import type { ReadEnvironment } from "./server/kube-environment.js";
import { TunnelServer } from "./server/server.js";
import type { TunnelConfig } from "./config.js";

export type TunnelSettings = Pick<TunnelConfig, "listen" | "podAddress" | "refreshMs" | "acceptTimeoutMs" | "dns" | "name" | "tls"> & { liveness: Liveness };

export interface TunnelDeps {
  store: EventStore;
  authorize: Authorize;
  logger: Logger;
  listServices?: ListServices;
  metrics?: TunnelMetrics;
  /** A local's baseline configuration, read from the cluster (kubeEnvironment); absent: /v1/environment answers 501. */
  readEnvironment?: ReadEnvironment;
}

export interface RunningTunnel {
  port: number;
  /** host:port a client connects to. */
  address: string;
  server: TunnelServer;
  /** Ends every session as "shutdown", writes their events, stops listening. */
  stop(): Promise<void>;
}

export async function startTunnel(settings: TunnelSettings, deps: TunnelDeps): Promise<RunningTunnel> {
  const audit = new Audit(deps.store, deps.logger);
  const serverSettings = {
    podAddress: settings.podAddress, tunnel: settings.name, checkUrl: "", refreshMs: settings.refreshMs, liveness: settings.liveness,
    acceptTimeoutMs: settings.acceptTimeoutMs, helloTimeoutMs: 10_000, dialTimeoutMs: 10_000, ...(settings.tls ? { tls: settings.tls } : {}),
  };
  const server = new TunnelServer(serverSettings, {
    authorize: deps.authorize, audit, listServices: deps.listServices ?? noServices, logger: deps.logger,
    ...(deps.metrics ? { metrics: deps.metrics } : {}), ...(deps.readEnvironment ? { readEnvironment: deps.readEnvironment } : {}), ...(settings.dns.length ? { lookup: clusterLookup(settings.dns) } : {}),
  });
  const { host, port } = listenAddress(settings.listen);
  await new Promise<void>((resolve, reject) => {
    server.server.once("error", reject);
    server.server.listen(port, host, () => { server.server.removeListener("error", reject); resolve(); });
  });
  const bound = (server.server.address() as { port: number }).port;
  // The cluster asks at the pod's address and the port bound (no session opens before this).
  serverSettings.checkUrl = checkUrl(settings.podAddress, bound, !!settings.tls);
  deps.logger.info({ listen: `${host}:${bound}`, tls: !!settings.tls, podAddress: settings.podAddress, checkUrl: serverSettings.checkUrl }, "tunnel listening");
  return { port: bound, address: `${host.includes(":") ? `[${host}]` : host}:${bound}`, server, stop: () => server.stop() };
}

function listenAddress(listen: string): { host: string; port: number } {
  const i = listen.lastIndexOf(":");
  const host = listen.slice(0, i).replace(/^\[(.*)\]$/, "$1");
  const port = Number(listen.slice(i + 1));
  if (i <= 0 || !host || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`EPHEMERA_TUNNEL_LISTEN must be host:port (e.g. 0.0.0.0:7785), got "${listen}"`);
  }
  return { host, port };
}

/** Where the cluster asks this tunnel whether a session is alive: its pod address and listen port. */
export function checkUrl(podAddress: string, port: number, tls: boolean): string {
  const host = podAddress.includes(":") ? `[${podAddress}]` : podAddress;
  return `${tls ? "https" : "http"}://${host}:${port}`;
}
