// Workstation → cluster: a target named as a pod would name a Service (`<svc>.<ns>`,
// `<svc>.<ns>.svc`, `<svc>.<ns>.svc.cluster.local`) or an IP, connected from the tunnel's pod.
// Names are resolved by the cluster's DNS when EPHEMERA_TUNNEL_DNS names it, else by the system's.
import { connect, isIP, type Socket } from "node:net";
import type { LookupFunction } from "@ephemera/kit";

const SERVICE_NAME = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?\.[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.svc(\.cluster\.local)?)?$/;

/** Why `host` is not a target the tunnel dials; undefined when it is one. */
export function targetProblem(host: string): string | undefined {
  if (isIP(host) || SERVICE_NAME.test(host)) return undefined;
  return `${host} is neither a Service's name (<svc>.<ns>, <svc>.<ns>.svc, <svc>.<ns>.svc.cluster.local) nor an IP`;
}

/** A connected socket, or the reason it could not be had within `timeoutMs` (one line). */
export function dialTarget(host: string, port: number, lookup: LookupFunction | undefined, timeoutMs: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, ...(lookup && !isIP(host) ? { lookup } : {}) });
    const timer = setTimeout(() => socket.destroy(new Error(`no connection within ${timeoutMs} ms`)), timeoutMs);
    socket.once("error", (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(new Error(`${host}:${port} cannot be reached: ${err.code ?? err.message}`));
    });
    socket.once("connect", () => {
      clearTimeout(timer);
      socket.removeAllListeners("error");
      resolve(socket);
    });
  });
}
