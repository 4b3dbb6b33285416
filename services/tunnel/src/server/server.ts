// The tunnel's HTTP/2 server (TLS with the API's certificate, else h2c): routes each stream
// to the session it belongs to. A session's accept streams must come on its own connection;
// its dial, services and environment requests carry its id and the same token as its hello.
import { createHash, timingSafeEqual } from "node:crypto";
import { createSecureServer, createServer, type Http2Server, type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from "node:http2";
import { errorMessage, ulidGen, type Logger, type LookupFunction, type ServerTls } from "@ephemera/kit";
import { HEADERS, PATHS, WINDOWS, parseTarget, readLines } from "../protocol.js";
import type { Audit } from "./audit.js";
import { isRefusal, type Authorize } from "./authorize.js";
import { dialTarget, targetProblem } from "./dial.js";
import { answerEnvironment } from "./environment.js";
import type { ReadEnvironment } from "./kube-environment.js";
import type { TunnelMetrics } from "./metrics.js";
import type { ListServices } from "./services.js";
import { Session, type SessionSettings } from "./session.js";

export interface ServerDeps {
  authorize: Authorize;
  audit: Audit;
  listServices: ListServices;
  logger: Logger;
  metrics?: TunnelMetrics;
  /** Name resolution of dial targets (the cluster's DNS); absent: the system's. */
  lookup?: LookupFunction;
  /** A local's baseline configuration from the cluster; absent: the tunnel sees no cluster. */
  readEnvironment?: ReadEnvironment;
}

export interface ServerSettings extends SessionSettings {
  tls?: ServerTls;
  /** How long a hello, and a dial's connection, may take. */
  helloTimeoutMs: number;
  dialTimeoutMs: number;
}

const bearer = (headers: IncomingHttpHeaders): string | undefined => {
  const value = headers.authorization;
  return typeof value === "string" && value.startsWith("Bearer ") ? value.slice(7).trim() || undefined : undefined;
};
const digest = (token: string | undefined) => createHash("sha256").update(token ?? "").digest();
const sameToken = (a: string | undefined, b: string | undefined) => timingSafeEqual(digest(a), digest(b));

export function answer(stream: ServerHttp2Stream, status: number, text: string): void {
  if (stream.destroyed || stream.headersSent) return;
  stream.respond({ ":status": status, "content-type": "text/plain; charset=utf-8" });
  stream.end(`${text.replace(/[\r\n]+/g, " ")}\n`);
}

export class TunnelServer {
  readonly sessions = new Map<string, Session>();
  readonly server: Http2Server;
  private readonly newId = ulidGen();
  private stopping = false;
  private readonly connections = new Set<ServerHttp2Session>();

  constructor(private readonly settings: ServerSettings, private readonly deps: ServerDeps) {
    this.server = settings.tls
      ? createSecureServer({ cert: settings.tls.cert, key: settings.tls.key, allowHTTP1: false, settings: { initialWindowSize: WINDOWS.stream } })
      : createServer({ settings: { initialWindowSize: WINDOWS.stream } });
    this.server.on("stream", (stream, headers) => this.route(stream, headers));
    this.server.on("session", (http: ServerHttp2Session) => {
      this.connections.add(http);
      http.once("close", () => this.connections.delete(http));
      http.setLocalWindowSize(WINDOWS.connection);
    });
    this.server.on("sessionError", (err) => deps.logger.debug({ err: errorMessage(err) }, "tunnel: connection error"));
  }

  /** Ends every session as "shutdown" (each recorded), then stops listening. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all([...this.sessions.values()].map((s) => s.end("shutdown")));
    await this.deps.audit.flush();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    // Connections without a session (a refused hello, one between requests) are not waited for.
    for (const http of this.connections) http.destroy();
    await closed;
  }

  private route(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
    stream.on("error", () => undefined); // a reset stream is the peer's business; what it carried records its end
    const path = String(headers[":path"] ?? "");
    const method = String(headers[":method"] ?? "");
    if (path === PATHS.health && method === "GET") return answer(stream, this.stopping ? 503 : 200, this.stopping ? "stopping" : "ok");
    if (this.stopping) return answer(stream, 503, "the tunnel is stopping");
    if (path === PATHS.session && method === "POST") return void this.openSession(stream, headers);
    if (path.startsWith(PATHS.accept) && method === "POST") return this.accept(stream, headers, decodeURIComponent(path.slice(PATHS.accept.length)));
    if (path === PATHS.dial && method === "POST") return void this.dial(stream, headers);
    if (path === PATHS.services && method === "GET") return void this.services(stream, headers);
    if (path === PATHS.environment && method === "POST") return void this.environment(stream, headers);
    if (path.startsWith(PATHS.sessions) && method === "GET") return this.sessionAlive(stream, decodeURIComponent(path.slice(PATHS.sessions.length)));
    answer(stream, 404, `no ${method} ${path.slice(0, 100)} here: the tunnel serves ${Object.values(PATHS).join(", ")}`);
  }

  private async openSession(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): Promise<void> {
    const token = bearer(headers);
    const http = stream.session as ServerHttp2Session | undefined;
    if (!http) return;
    const peer = http.socket?.remoteAddress ? `${http.socket.remoteAddress}:${http.socket.remotePort}` : "";
    let session: Session | undefined;
    let helloRead = false;
    // Messages sent right after the hello wait for the session to open.
    const early: unknown[] = [];
    const timer = setTimeout(() => answer(stream, 400, `no hello within ${this.settings.helloTimeoutMs} ms`), this.settings.helloTimeoutMs);
    readLines(stream, (message) => {
      if (session) return session.onMessage(message);
      if (helloRead) return void early.push(message);
      helloRead = true;
      clearTimeout(timer);
      const hello = helloProblem(message);
      if (typeof hello === "string") return answer(stream, 400, hello);
      stream.pause();
      this.deps.authorize(token, hello.sandboxes).then(async (authorization) => {
        if (stream.destroyed) return;
        stream.respond({ ":status": 200, "content-type": "application/x-ndjson" });
        session = await Session.open({ id: this.newId().toLowerCase(), token, sandboxes: hello.sandboxes, client: hello.client, peer, http, control: stream, authorization },
          this.settings, this.deps, (s) => this.sessions.delete(s.id));
        this.sessions.set(session.id, session);
        this.deps.logger.info({ sessionId: session.id, subject: session.subject, peer, serving: session.serving().length }, "tunnel session opened");
        for (const message of early.splice(0)) session.onMessage(message);
        stream.resume();
      }).catch((err: unknown) => {
        if (isRefusal(err)) return answer(stream, err.status, err.message);
        this.deps.logger.error({ err }, "tunnel: a session could not be opened");
        if (stream.headersSent) stream.close(); else answer(stream, 503, `the session could not be opened: ${errorMessage(err)}`);
      });
    }, (err) => {
      clearTimeout(timer);
      if (session) void session.end("lost"); else answer(stream, 400, err.message);
    });
  }

  private accept(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, openId: string): void {
    const error = headers[HEADERS.error];
    for (const session of this.sessions.values()) {
      // Only the session's own connection may answer its opens.
      if (session.http !== stream.session) continue;
      if (session.accept(openId, stream, typeof error === "string" ? error.slice(0, 200) : undefined)) return;
    }
    answer(stream, 404, `no connection ${openId.slice(0, 40)} waits for this session (it timed out, closed, or is not this session's)`);
  }

  /** The session a dial or services request belongs to, or the answer already sent. */
  private sessionOf(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): Session | undefined {
    const id = headers[HEADERS.session];
    if (typeof id !== "string" || !id) return void answer(stream, 400, `${HEADERS.session} is required: the id of the session this request belongs to`);
    const session = this.sessions.get(id);
    if (!session || !session.open) return void answer(stream, 404, `session ${id.slice(0, 40)} is not open on this tunnel`);
    if (!sameToken(bearer(headers), session.token)) return void answer(stream, 403, `session ${id} was opened with another token`);
    return session;
  }

  private async dial(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): Promise<void> {
    const session = this.sessionOf(stream, headers);
    if (!session) return;
    const raw = String(headers[HEADERS.target] ?? "");
    const target = parseTarget(raw);
    if (!target) return answer(stream, 400, `${HEADERS.target} must be host:port, got "${raw.slice(0, 100)}"`);
    const problem = targetProblem(target.host);
    if (problem) return answer(stream, 400, problem);
    stream.pause();
    try {
      const socket = await dialTarget(target.host, target.port, this.deps.lookup, this.settings.dialTimeoutMs);
      if (stream.destroyed || !session.open) return void socket.destroy();
      stream.respond({ ":status": 200, "content-type": "application/octet-stream" });
      session.carryDial(raw, socket, stream);
    } catch (err) {
      answer(stream, 502, errorMessage(err));
    }
  }

  /**
   * Whether a session is open here: the cluster's check of the tunnel (no token: a session id
   * is unguessable, and the answer is one bit). Touches no workstation and writes no event.
   */
  private sessionAlive(stream: ServerHttp2Stream, id: string): void {
    const open = !!this.sessions.get(id)?.open;
    answer(stream, open ? 200 : 404, open ? "open" : `session ${id.slice(0, 40)} is not open on this tunnel`);
  }

  private async services(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): Promise<void> {
    if (!this.sessionOf(stream, headers)) return;
    try {
      const list = await this.deps.listServices();
      stream.respond({ ":status": 200, "content-type": "application/json" });
      stream.end(JSON.stringify(list));
    } catch (err) {
      answer(stream, 503, `the cluster's Services cannot be listed now: ${errorMessage(err)}`);
    }
  }

  private async environment(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): Promise<void> {
    const session = this.sessionOf(stream, headers);
    if (session) await answerEnvironment(stream, session, this.deps, answer);
  }
}

/** The hello, or what is wrong with it (one line naming the field). */
function helloProblem(message: unknown): { sandboxes: string[]; client: string } | string {
  const m = message as { type?: unknown; sandboxes?: unknown; client?: unknown } | null;
  if (!m || typeof m !== "object" || m.type !== "hello") return `the first message must be {"type":"hello",...}, got ${JSON.stringify(message).slice(0, 80)}`;
  const sandboxes = m.sandboxes ?? [];
  if (!Array.isArray(sandboxes) || !sandboxes.every((s) => typeof s === "string" && s.length > 0 && s.length <= 253)) {
    return "hello.sandboxes must be a list of sandbox names";
  }
  if (sandboxes.length > 100) return "hello.sandboxes may name at most 100 sandboxes";
  const client = m.client ?? "";
  if (typeof client !== "string" || client.length > 200) return "hello.client must be a string of at most 200 characters";
  return { sandboxes: sandboxes as string[], client };
}
