// The browser's session: the API token it signed in with, kept in an HttpOnly cookie (or
// sent as `Authorization: Bearer` by other clients), and the CSRF header every change needs. Pure.
import type { IncomingHttpHeaders } from "node:http";

export const SESSION_COOKIE = "ephemera_console";
export const CSRF_HEADER = "x-ephemera-console";

/** The token a request carries: the Authorization header first, then the cookie. */
export function requestToken(headers: IncomingHttpHeaders): string | undefined {
  const auth = headers.authorization;
  if (auth?.startsWith("Bearer ")) return auth.slice("Bearer ".length).trim() || undefined;
  for (const part of (headers.cookie ?? "").split(";")) {
    const c = part.trim();
    if (!c.startsWith(`${SESSION_COOKIE}=`)) continue;
    try {
      return decodeURIComponent(c.slice(SESSION_COOKIE.length + 1)) || undefined;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** The Set-Cookie value keeping `token` for this console (a browser session's cookie). */
export function sessionCookie(token: string, secure: boolean): string {
  return `${SESSION_COOKIE}=${encodeURIComponent(token)}; HttpOnly; SameSite=Strict; Path=/${secure ? "; Secure" : ""}`;
}

/** The Set-Cookie value that ends the session. */
export function clearedCookie(secure: boolean): string {
  return `${SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0${secure ? "; Secure" : ""}`;
}

/** Whether a request that changes something says it comes from the console's page (a form on another site cannot set headers). */
export const hasCsrfHeader = (headers: IncomingHttpHeaders): boolean => headers[CSRF_HEADER] === "1";
