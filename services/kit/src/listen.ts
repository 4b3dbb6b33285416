// Where a server listens, as far as who can reach it goes.
import { isIP } from "node:net";

/** True when `host:port` (or `[v6]:port`) is reachable from this machine only: 127.0.0.0/8, ::1 or localhost. */
export function isLoopback(listen: string): boolean {
  const host = listen.startsWith("[") ? listen.slice(1, listen.indexOf("]")) : listen.slice(0, listen.lastIndexOf(":")) || listen;
  if (host === "localhost") return true;
  if (isIP(host) === 4) return host.startsWith("127.");
  return host === "::1" || /^::ffff:127\./i.test(host);
}

/** A server that asks for the API's bearer tokens, named for the line said when it does not. */
export interface GuardedServer {
  /** e.g. "the API". */
  name: string;
  /** What anyone who reaches it may do while it is open, e.g. "apply and delete". */
  may: string;
}

export const API_SERVER: GuardedServer = { name: "the API", may: "apply and delete" };
export const ROUTES_SERVER: GuardedServer = { name: "the Routes API", may: "read every sandbox's routes" };
export const GATEWAY_SERVER: GuardedServer = { name: "the preview gateway", may: "open every sandbox's endpoints" };
export const CONSOLE_SERVER: GuardedServer = { name: "the console", may: "read every sandbox, and delete and retry them" };
export const TUNNEL_SERVER: GuardedServer = { name: "the tunnel", may: "receive every sandbox's traffic for its local workloads and reach every cluster Service" };

/**
 * A server without bearer tokens lets anyone who reaches it do what it serves: fine on
 * loopback (a laptop's `pnpm start`), refused elsewhere unless `allowOpen`
 * (EPHEMERA_API_ALLOW_OPEN). The public API, the Routes API, the preview gateway, the tunnel and the console follow this one rule.
 * Returns the line to say at start when the server is open, undefined when it asks for tokens.
 */
export function openApiNotice(
  listen: string, options: { secured: boolean; allowOpen?: boolean; server?: GuardedServer },
): string | undefined {
  if (options.secured) return undefined;
  const { name, may } = options.server ?? API_SERVER;
  const open = `${name} on ${listen} is open: no EPHEMERA_API_TOKENS or EPHEMERA_API_JWKS, so anyone who reaches it may ${may}`;
  if (isLoopback(listen)) return `${open} (loopback only: processes of this machine)`;
  if (!options.allowOpen) {
    throw new Error(`${open}, from other machines too. Set EPHEMERA_API_TOKENS or EPHEMERA_API_JWKS (docs/security.md), listen on loopback, or set EPHEMERA_API_ALLOW_OPEN=true`);
  }
  return `${open}, from other machines too (EPHEMERA_API_ALLOW_OPEN)`;
}
