// What `eph local connect` needs of a tunnel session (@ephemera/tunnel/client's TunnelClient):
// the daemon, the proxies and the host entries are written against this, so each can be
// tested with a dial to real local servers, and the client library is loaded only by the daemon.
import type { Duplex } from "node:stream";

/** Workstation → cluster: one TCP stream to `host:port` as the cluster sees it. */
export type Dial = (host: string, port: number) => Promise<Duplex>;

export interface Served {
  sandbox: string;
  routingKey: string;
  local: string;
  mappings: Array<{ port: number; toLocal: string }>;
}

export interface ClusterService {
  namespace: string;
  name: string;
  ports: number[];
}
