// The tunnel's client library (`@ephemera/tunnel/client`), as `eph local connect` uses it: one
// HTTP/2 connection to the tunnel service holding a session. The cluster's connections to the
// workstation's local workloads arrive as "open"s, each served here by dialling its `toLocal`
// and piping it to an accept stream; `dial` goes the other way, to a cluster Service.
import { EventEmitter } from "node:events";
import { connect as http2Connect, type ClientHttp2Session, type ClientHttp2Stream } from "node:http2";
import { Socket, connect as netConnect } from "node:net";
import type { Duplex } from "node:stream";
import type { Logger } from "@ephemera/kit";
import { DEFAULT_LIVENESS, keepAlive, type Liveness } from "./liveness.js";
import { HEADERS, PATHS, WINDOWS, line, parseTarget, readLines, type ClientMessage, type ClusterService, type Served, type ServerMessage, type SessionEndReason } from "./protocol.js";
import type { Environment } from "./protocol.js";

export type { ClusterService, Served, Mapping, SessionEndReason } from "./protocol.js";
export type { Environment } from "./protocol.js";

export interface TunnelClientOptions {
  /** host:port of the tunnel service. */
  address: string;
  /** The API's bearer token, sent with every request. */
  token?: string;
  /** TLS to the tunnel (true: the system's roots); absent or false: h2c, for a local tunnel. */
  tls?: boolean | { ca?: Buffer; servername?: string };
  /** The sandboxes to serve; absent or empty: every sandbox with a local entry the token may serve. */
  sandboxes?: string[];
  /** What the workstation says it is (`eph/0.1.0 host`). */
  client?: string;
  logger?: Logger;
  /** How an "open"'s `toLocal` is dialled (default: a TCP connection); a stream that emits "connect" as a socket does. */
  dialLocal?: (toLocal: string) => Duplex;
  /** PINGs to the tunnel (default every 2 s, lost after 5 s without an answer). */
  liveness?: Liveness;
  /** How long connecting and the welcome may take (default 15 s). */
  timeoutMs?: number;
}

/** The tunnel refused the session or a request: its HTTP status and its one-line reason. */
export class TunnelRefused extends Error {
  override readonly name = "TunnelRefused";
  constructor(readonly status: number, readonly reason: string) {
    super(`the tunnel refused (${status}): ${reason}`);
  }
}
export const isTunnelRefused = (err: unknown): err is TunnelRefused => err instanceof TunnelRefused;

/** One cluster → workstation connection, once it ended. */
export interface ConnectionEnded {
  sandbox: string;
  local: string;
  port: number;
  toLocal: string;
  bytesToWorkstation: number;
  bytesToCluster: number;
  error?: string;
}

export interface ClosedEvent { reason: SessionEndReason; error?: Error }

const ACCEPT_TIMEOUT_MS = 10_000;

export class TunnelClient extends EventEmitter {
  readonly sessionId: string;
  readonly subject: string;
  serving: Served[];
  private open = 0;
  private connections = 0;
  private bytesToWorkstation = 0;
  private bytesToCluster = 0;
  private closed?: ClosedEvent;
  private saidBye = false;
  private serverReason?: SessionEndReason;
  private readonly stopLiveness: () => void;
  private readonly streams = new Set<Duplex>();

  private constructor(
    private readonly session: ClientHttp2Session, private readonly control: ClientHttp2Stream,
    private readonly options: TunnelClientOptions, welcome: Extract<ServerMessage, { type: "welcome" }>,
  ) {
    super();
    this.sessionId = welcome.sessionId;
    this.subject = welcome.subject;
    this.serving = welcome.serving;
    this.stopLiveness = keepAlive(session, options.liveness ?? DEFAULT_LIVENESS, (why) => {
      this.finish(new Error(`the tunnel stopped answering: ${why}`));
      session.destroy();
    });
    // The tunnel ending its side ends the session; so does the stream or the connection closing.
    control.on("end", () => this.finish());
    control.on("close", () => this.finish());
    session.on("close", () => this.finish());
    session.on("error", (err: Error) => this.finish(err));
  }

  /** Opens the session; resolves on the welcome, rejects with TunnelRefused (status and reason) or the connection's error. */
  static connect(options: TunnelClientOptions): Promise<TunnelClient> {
    const tls = options.tls;
    const authority = `${tls ? "https" : "http"}://${options.address}`;
    const session = http2Connect(authority, {
      settings: { initialWindowSize: WINDOWS.stream },
      ...(typeof tls === "object" ? { ...(tls.ca ? { ca: tls.ca } : {}), ...(tls.servername ? { servername: tls.servername } : {}) } : {}),
    });
    session.once("connect", () => session.setLocalWindowSize(WINDOWS.connection));
    return new Promise<TunnelClient>((resolve, reject) => {
      let settled = false;
      const fail = (err: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        session.destroy();
        reject(err);
      };
      const timeoutMs = options.timeoutMs ?? 15_000;
      const timer = setTimeout(() => fail(new Error(`no welcome from the tunnel at ${options.address} within ${timeoutMs} ms`)), timeoutMs);
      session.once("error", (err: Error) => fail(unreachable(options.address, err)));
      const control = session.request({ ":method": "POST", ":path": PATHS.session, ...auth(options.token), "content-type": "application/x-ndjson" });
      // A tunnel that cannot be reached fails the pending stream too: without a listener that error would end the process.
      control.on("error", (err: Error) => fail(unreachable(options.address, err)));
      const hello: ClientMessage = { type: "hello", sandboxes: options.sandboxes ?? [], client: options.client ?? "ephemera-tunnel-client" };
      control.write(line(hello));
      control.once("response", (headers) => {
        const status = Number(headers[":status"]);
        if (status !== 200) {
          void readBody(control).then((body) => fail(new TunnelRefused(status, body.trim().split("\n")[0] ?? "")), fail);
          return;
        }
        let client: TunnelClient | undefined;
        readLines(control, (message) => {
          const m = message as ServerMessage;
          if (client) return client.onMessage(m);
          if (m.type !== "welcome") return fail(new Error(`the tunnel's first message is ${m.type}, not welcome`));
          settled = true;
          clearTimeout(timer);
          client = new TunnelClient(session, control, options, m);
          resolve(client);
        }, (err) => (client ? client.finish(err) : fail(err)));
      });
      control.once("close", () => fail(new Error(`the tunnel at ${options.address} ended the session before its welcome`)));
    });
  }

  /** A connection to `host:port` in the cluster (`<svc>.<ns>.svc`, `<svc>.<ns>`, or an IP), through the tunnel. */
  dial(host: string, port: number): Promise<Duplex> {
    const target = `${host}:${port}`;
    if (!parseTarget(target)) return Promise.reject(new Error(`dial: ${target} is not host:port`));
    const stream = this.request({ ":method": "POST", ":path": PATHS.dial, [HEADERS.target]: target });
    return new Promise((resolve, reject) => {
      stream.once("error", reject);
      stream.once("response", (headers) => {
        const status = Number(headers[":status"]);
        if (status !== 200) {
          void readBody(stream).then((body) => reject(new TunnelRefused(status, body.trim().split("\n")[0] ?? "")), reject);
          return;
        }
        stream.removeListener("error", reject);
        this.track(stream);
        stream.on("data", (chunk: Buffer) => { this.bytesToWorkstation += chunk.length; });
        const write = stream.write.bind(stream);
        stream.write = ((chunk: Buffer | string, ...rest: never[]) => {
          this.bytesToCluster += Buffer.byteLength(chunk);
          return write(chunk, ...rest);
        }) as typeof stream.write;
        resolve(stream);
      });
    });
  }

  /** The cluster's Services, when the tunnel sees the cluster; else []. */
  async services(): Promise<ClusterService[]> {
    const stream = this.request({ ":method": "GET", ":path": PATHS.services });
    stream.end();
    const [status, body] = await Promise.all([
      new Promise<number>((resolve, reject) => { stream.once("response", (h) => resolve(Number(h[":status"]))); stream.once("error", reject); }),
      readBody(stream),
    ]);
    if (status !== 200) throw new TunnelRefused(status, body.trim().split("\n")[0] ?? "");
    return JSON.parse(body) as ClusterService[];
  }

  /**
   * The configuration the baseline of `local` (of `sandbox`, a local this session serves) runs
   * with in the cluster, and its customizations' cluster-only values: Secrets' values among them.
   * Rejects with TunnelRefused: 403 not served here, 501 the tunnel sees no cluster, 404 no baseline.
   */
  async environment(sandbox: string, local: string): Promise<Environment> {
    const stream = this.request({ ":method": "POST", ":path": PATHS.environment, "content-type": "application/json" });
    stream.end(JSON.stringify({ sandbox, local }));
    const [status, body] = await Promise.all([
      new Promise<number>((resolve, reject) => { stream.once("response", (h) => resolve(Number(h[":status"]))); stream.once("error", reject); }),
      readBody(stream),
    ]);
    if (status !== 200) throw new TunnelRefused(status, body.trim().split("\n")[0] ?? "");
    return JSON.parse(body) as Environment;
  }

  /** Asks the tunnel to re-evaluate what the session serves now. */
  refresh(): void {
    if (!this.closed) this.control.write(line({ type: "refresh" }));
  }

  stats(): { open: number; connections: number; bytesToWorkstation: number; bytesToCluster: number } {
    return { open: this.open, connections: this.connections, bytesToWorkstation: this.bytesToWorkstation, bytesToCluster: this.bytesToCluster };
  }

  /** Says bye and ends the session; resolves once it is closed. */
  async close(): Promise<void> {
    if (this.closed) return;
    const ended = new Promise<void>((resolve) => this.once("closed", () => resolve()));
    this.saidBye = true;
    this.control.end(line({ type: "bye" }));
    // The tunnel ends the control stream on bye; a tunnel that does not is not waited for long.
    const timer = setTimeout(() => this.session.destroy(), 5_000);
    await ended;
    clearTimeout(timer);
  }

  private onMessage(message: ServerMessage): void {
    if (message.type === "serving") {
      this.serving = message.serving;
      this.emit("serving", message.serving);
    } else if (message.type === "open") {
      this.accept(message);
    } else if (message.type === "closing") {
      this.serverReason = message.reason;
    }
  }

  /** Serves an "open": dials its toLocal, then pipes it to an accept stream; a failed dial is told to the tunnel. */
  private accept(open: Extract<ServerMessage, { type: "open" }>): void {
    const path = `${PATHS.accept}${encodeURIComponent(open.id)}`;
    const local = this.options.dialLocal ? this.options.dialLocal(open.toLocal) : dialTcp(open.toLocal);
    const ended: ConnectionEnded = { sandbox: open.sandbox, local: open.local, port: open.port, toLocal: open.toLocal, bytesToWorkstation: 0, bytesToCluster: 0 };
    this.open++;
    this.connections++;
    let done = false;
    const finish = (err?: Error) => {
      if (done) return;
      done = true;
      this.open--;
      if (err) ended.error = err.message;
      this.emit("connection", ended);
    };
    const timer = setTimeout(() => local.destroy(new Error(`connecting to ${open.toLocal} took over ${ACCEPT_TIMEOUT_MS} ms`)), ACCEPT_TIMEOUT_MS);
    const refuse = (err: Error) => {
      clearTimeout(timer);
      if (this.closed) return finish(err);
      const reason = oneLine(`cannot connect to ${open.toLocal}: ${(err as NodeJS.ErrnoException).code ?? err.message}`);
      const stream = this.request({ ":method": "POST", ":path": path, [HEADERS.error]: reason });
      stream.on("error", () => undefined);
      stream.end();
      stream.resume();
      finish(err);
    };
    local.once("error", refuse);
    local.once("connect", () => {
      clearTimeout(timer);
      local.removeListener("error", refuse);
      if (this.closed) { local.destroy(); return finish(new Error("the session ended")); }
      const stream = this.request({ ":method": "POST", ":path": path });
      this.track(stream);
      local.on("data", (chunk: Buffer) => { ended.bytesToCluster += chunk.length; this.bytesToCluster += chunk.length; });
      stream.on("data", (chunk: Buffer) => { ended.bytesToWorkstation += chunk.length; this.bytesToWorkstation += chunk.length; });
      local.pipe(stream);
      stream.pipe(local);
      let closedSides = 0;
      let firstError: Error | undefined;
      const side = (err?: Error) => {
        firstError ??= err;
        if (err) { local.destroy(); stream.destroy(); }
        if (++closedSides === 2) finish(firstError);
      };
      local.once("error", (err: Error) => side(err));
      stream.once("error", (err: Error) => side(err));
      local.once("close", () => { if (!stream.destroyed && !stream.writableEnded) stream.end(); side(); });
      stream.once("close", () => { if (!local.destroyed) local.end(); side(); });
    });
  }

  private request(headers: Record<string, string>): ClientHttp2Stream {
    return this.session.request({ ...headers, ...auth(this.options.token), [HEADERS.session]: this.sessionId });
  }

  private track(stream: Duplex): void {
    this.streams.add(stream);
    stream.once("close", () => this.streams.delete(stream));
  }

  /** Ends the session once: every stream of it closed, and "closed" emitted with why. */
  private finish(err?: Error): void {
    if (this.closed) return;
    const reason: SessionEndReason = this.serverReason ?? (this.saidBye ? "disconnect" : "lost");
    this.closed = { reason, ...(err && reason === "lost" ? { error: err } : {}) };
    this.stopLiveness();
    for (const stream of this.streams) stream.destroy();
    if (!this.control.destroyed) this.control.close();
    if (!this.session.destroyed) this.session.close();
    this.options.logger?.info({ sessionId: this.sessionId, reason }, "tunnel session closed");
    this.emit("closed", this.closed);
  }
}

function auth(token: string | undefined): Record<string, string> {
  return token ? { authorization: `Bearer ${token}` } : {};
}

function dialTcp(toLocal: string): Duplex {
  const target = parseTarget(toLocal);
  if (!target) {
    const failed = new Socket();
    process.nextTick(() => failed.destroy(new Error(`toLocal ${toLocal} is not host:port`)));
    return failed;
  }
  return netConnect({ host: target.host, port: target.port });
}

const oneLine = (text: string) => text.replace(/[\r\n]+/g, " ").slice(0, 200);

function readBody(stream: ClientHttp2Stream): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.once("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    stream.once("error", reject);
  });
}

/**
 * Why the tunnel could not be reached, in words: a TLS client meeting a plaintext (h2c)
 * tunnel gets OpenSSL's "wrong version number", which says nothing to a user.
 */
export function unreachable(address: string, err: Error): Error {
  // Not `instanceof Error`: errors made by Node's internals may come from another realm (a test runner's sandbox).
  const chain: Error[] = [];
  for (let e: unknown = err; isError(e) && chain.length < 5; e = e.cause) chain.push(e);
  const plaintext = chain.some((e) => (e as { code?: string }).code === "ERR_SSL_WRONG_VERSION_NUMBER")
    || /wrong version number/.test(err.message);
  if (plaintext) {
    return new Error(`cannot reach the tunnel at ${address} over TLS: it answers in plaintext (a tunnel without EPHEMERA_TLS_CERT); `
      + "give it a certificate, or connect with --insecure to send the token in plaintext", { cause: err });
  }
  // A stream cancelled because its connection failed says so around the connection's error: the latter is the reason.
  const deepest = chain[chain.length - 1] ?? err;
  return new Error(`cannot reach the tunnel at ${address}: ${deepest.message}`, { cause: err });
}

const isError = (e: unknown): e is Error => typeof e === "object" && e !== null && typeof (e as Error).message === "string";
