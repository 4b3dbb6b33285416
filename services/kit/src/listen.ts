// Where a server listens, as far as who can reach it goes.
import { isIP } from "node:net";

/** True when `host:port` (or `[v6]:port`) is reachable from this machine only: 127.0.0.0/8, ::1 or localhost. */
export function isLoopback(listen: string): boolean {
  const host = listen.startsWith("[") ? listen.slice(1, listen.indexOf("]")) : listen.slice(0, listen.lastIndexOf(":")) || listen;
  if (host === "localhost") return true;
  if (isIP(host) === 4) return host.startsWith("127.");
  return host === "::1" || /^::ffff:127\./i.test(host);
}
