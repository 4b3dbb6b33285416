// How a viewer's token reaches the gateway: a browser posts it once to /.ephemera/login and
// gets it back as an HttpOnly cookie for the whole preview domain (every endpoint URL);
// other clients send it in X-Ephemera-Token. Both are removed before a request is forwarded.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";

export const TOKEN_COOKIE = "ephemera_token";
export const TOKEN_HEADER = "x-ephemera-token";

const cookies = (header: string | undefined) => (header ?? "").split(";").map((c) => c.trim()).filter(Boolean);

/** Pure: the token a request carries (the header first, then the cookie), if any. */
export function gatewayToken(headers: IncomingHttpHeaders): string | undefined {
  const header = headers[TOKEN_HEADER];
  if (typeof header === "string" && header) return header.trim();
  const cookie = cookies(headers.cookie).find((c) => c.startsWith(`${TOKEN_COOKIE}=`));
  return cookie ? decodeURIComponent(cookie.slice(TOKEN_COOKIE.length + 1)) : undefined;
}

/** Pure: the headers without the gateway's token (header and cookie). */
export function withoutGatewayToken(headers: OutgoingHttpHeaders): OutgoingHttpHeaders {
  const out = { ...headers };
  delete out[TOKEN_HEADER];
  const rest = cookies(typeof out.cookie === "string" ? out.cookie : undefined).filter((c) => !c.startsWith(`${TOKEN_COOKIE}=`));
  if (rest.length) out.cookie = rest.join("; "); else delete out.cookie;
  return out;
}

/** Pure: the Set-Cookie value keeping `token` for every host of the preview domain. */
export function tokenCookie(token: string, domain: string, secure: boolean): string {
  return [`${TOKEN_COOKIE}=${encodeURIComponent(token)}`, `Domain=${domain}`, "Path=/", "HttpOnly", "SameSite=Lax", ...(secure ? ["Secure"] : [])].join("; ");
}

const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** The sign-in form; `error` says why the last token was refused (never the token). */
export function loginPage(next: string, error: string | undefined): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>ephemera preview: sign in</title></head>
<body>
<h1>Sign in to open sandbox endpoints</h1>
<p>Paste an ephemera API token (viewer or above). It is kept in a cookie for this preview domain.</p>
${error ? `<p role="alert">${escape(error)}</p>` : ""}
<form method="post" action="/.ephemera/login?next=${encodeURIComponent(next)}">
<label>Token <input type="password" name="token" autocomplete="off" required></label>
<button type="submit">Sign in</button>
</form>
</body></html>
`;
}
