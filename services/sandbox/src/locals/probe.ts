// Asks a tunnel whether its sessions are open: `GET /v1/sessions/<id>` on its listener
// (docs/tunnel.md), HTTP/2, TLS when the URL says https. One connection per tunnel and round,
// closed after; nothing touches a workstation or writes an event. The tunnel's certificate is
// not verified: it is issued for the name workstations use, not the pod IP asked here, and the
// answer is one bit with nothing sent but the session id (see docs/local.md, the health check).
import { connect, constants, type ClientHttp2Session } from "node:http2";
import type { Answer } from "./strikes.js";

/** The path of a session's check on the tunnel, followed by its id. */
export const SESSIONS_PATH = "/v1/sessions/";

export type AskTunnel = (url: string, sessionIds: readonly string[], timeoutMs: number) => Promise<Map<string, Answer>>;

/** Each session's answer within `timeoutMs`; a tunnel that cannot be reached (or is too slow) is "unreachable" for all of them. */
export const askTunnel: AskTunnel = async (url, sessionIds, timeoutMs) => {
  let client: ClientHttp2Session;
  try {
    client = connect(url, url.startsWith("https:") ? { rejectUnauthorized: false } : {});
  } catch {
    return new Map(sessionIds.map((id) => [id, "unreachable"])); // not a URL: nothing to ask
  }
  client.on("error", () => undefined); // every pending request says so on its own
  const timer = setTimeout(() => client.destroy(), timeoutMs);
  try {
    const answers = await Promise.all(sessionIds.map((id) => new Promise<[string, Answer]>((resolve) => {
      const request = client.request({ [constants.HTTP2_HEADER_PATH]: `${SESSIONS_PATH}${encodeURIComponent(id)}` }, { endStream: true });
      request.on("response", (headers) => {
        const status = Number(headers[constants.HTTP2_HEADER_STATUS]);
        resolve([id, status === 200 ? "open" : status === 404 ? "gone" : "unreachable"]);
        request.close();
      });
      request.on("error", () => resolve([id, "unreachable"]));
      request.on("close", () => resolve([id, "unreachable"]));
      request.resume();
    })));
    return new Map(answers);
  } finally {
    clearTimeout(timer);
    client.destroy();
  }
};
