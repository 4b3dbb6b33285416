// The cluster's side of a served local workload: one TCP listener per port mapping on the
// tunnel's pod address, port chosen by the system. Connections arrive paused, so no byte is
// read before the workstation has accepted them.
import { createServer, type Server, type Socket } from "node:net";
import type { Mapping, Served } from "../protocol.js";

export interface MappingListener {
  mapping: Mapping;
  server: Server;
  /** `ip:port` the cluster reaches it at. */
  address: string;
  port: number;
}

const hostPort = (host: string, port: number) => (host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`);

/** Listens for every mapping of `served`; on a failure the listeners already open are closed. */
export async function listen(served: Served, host: string, onConnection: (mapping: Mapping, socket: Socket) => void): Promise<MappingListener[]> {
  const open: MappingListener[] = [];
  try {
    for (const mapping of served.mappings) {
      const server = createServer({ pauseOnConnect: true }, (socket) => onConnection(mapping, socket));
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen({ host, port: 0 }, () => { server.removeListener("error", reject); resolve(); });
      });
      const port = (server.address() as { port: number }).port;
      open.push({ mapping, server, address: hostPort(host, port), port });
    }
  } catch (err) {
    closeListeners(open);
    throw new Error(`cannot listen on ${host} for ${served.sandbox}/${served.local}: ${(err as Error).message}`, { cause: err });
  }
  return open;
}

/** Stops accepting; the connections they made are ended by their session. */
export function closeListeners(listeners: MappingListener[]): void {
  for (const l of listeners) l.server.close();
}
