// Where a server listens, as far as who can reach it goes.
import { isIP } from "node:net";

/** True when `host:port` (or `[v6]:port`) is reachable from this machine only: 127.0.0.0/8, ::1 or localhost. */
export function isLoopback(listen: string): boolean {
  const host = listen.startsWith("[") ? listen.slice(1, listen.indexOf("]")) : listen.slice(0, listen.lastIndexOf(":")) || listen;
  if (host === "localhost") return true;
  if (isIP(host) === 4) return host.startsWith("127.");
  return host === "::1" || /^::ffff:127\./i.test(host);
}

/**
 * An API without bearer tokens lets anyone who reaches it apply and delete: fine on loopback
 * (a laptop's `pnpm start`), refused elsewhere unless `allowOpen` (EPHEMERA_API_ALLOW_OPEN).
 * Returns the line to say at start when the API is open, undefined when it asks for tokens.
 */
export function openApiNotice(listen: string, options: { secured: boolean; allowOpen?: boolean }): string | undefined {
  if (options.secured) return undefined;
  const open = `the API on ${listen} is open: no EPHEMERA_API_TOKENS or EPHEMERA_API_JWKS, so anyone who reaches it may apply and delete`;
  if (isLoopback(listen)) return `${open} (loopback only: processes of this machine)`;
  if (!options.allowOpen) {
    throw new Error(`${open}, from other machines too. Set EPHEMERA_API_TOKENS or EPHEMERA_API_JWKS (docs/security.md), listen on loopback, or set EPHEMERA_API_ALLOW_OPEN=true`);
  }
  return `${open}, from other machines too (EPHEMERA_API_ALLOW_OPEN)`;
}
