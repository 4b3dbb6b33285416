// One workstation's session: the control stream, the local workloads it serves (a listener per
// port mapping, their "connected" and "disconnected" events), every connection it carries
// either way, its liveness, and re-asking the API what it may serve. Everything a session
// opened ends with it: listeners, pending opens, and connections, each recorded.
import { randomBytes } from "node:crypto";
import type { ServerHttp2Session, ServerHttp2Stream } from "node:http2";
import type { Socket } from "node:net";
import { errorMessage, type Logger } from "@ephemera/kit";
import { keepAlive, type Liveness } from "../liveness.js";
import { line, type Mapping, type Served, type ServerMessage, type SessionEndReason } from "../protocol.js";
import type { Audit, SessionLog } from "./audit.js";
import { isRefusal, type Authorization, type Authorize } from "./authorize.js";
import { bridge, type Bridge, type BridgeEnd } from "./bridge.js";
import { closeListeners, listen, type MappingListener } from "./listeners.js";
import type { Direction, TunnelMetrics } from "./metrics.js";

export interface SessionSettings {
  /** Where listeners for the cluster are opened (an address the cluster reaches). */
  podAddress: string;
  /** This replica's name, recorded on the session. */
  tunnel: string;
  /**
   * Where the cluster asks whether a session is alive ("http://host:port" or "https://..."),
   * recorded on each locals.connected; known once the tunnel listens, set then.
   */
  checkUrl: string;
  refreshMs: number;
  liveness: Liveness;
  /** How long a cluster connection waits for the workstation to accept it. */
  acceptTimeoutMs: number;
}

export interface SessionDeps {
  authorize: Authorize;
  audit: Audit;
  logger: Logger;
  metrics?: TunnelMetrics;
}

export interface SessionStart {
  id: string;
  token: string | undefined;
  sandboxes: string[];
  client: string;
  peer: string;
  http: ServerHttp2Session;
  control: ServerHttp2Stream;
  authorization: Authorization;
}

interface ServedLocal { served: Served; listeners: MappingListener[] }
interface PendingOpen { socket: Socket; served: Served; mapping: Mapping; startedAt: Date; timer: NodeJS.Timeout }
interface Carried { direction: Direction; sandbox: string; local: string; target: string }

const keyOf = (s: Served) => `${s.routingKey}/${s.local}`;
const sameMappings = (a: Served, b: Served) => JSON.stringify(a.mappings) === JSON.stringify(b.mappings);

export class Session {
  readonly id: string;
  readonly token: string | undefined;
  readonly http: ServerHttp2Session;
  readonly subject: string;
  private readonly served = new Map<string, ServedLocal>();
  private readonly pending = new Map<string, PendingOpen>();
  private readonly connections = new Map<Bridge, { carried: Carried; ended: Promise<void> }>();
  private readonly totals = { connections: 0, toWorkstation: 0, toCluster: 0 };
  private readonly log: SessionLog;
  private ended?: SessionEndReason;
  private endedAll?: Promise<void>;
  private refreshing?: Promise<void>;
  private readonly stopLiveness: () => void;
  private readonly refreshTimer: NodeJS.Timeout;

  private constructor(
    private readonly start: SessionStart, private readonly settings: SessionSettings, private readonly deps: SessionDeps,
    private readonly onEnded: (session: Session) => void,
  ) {
    this.id = start.id;
    this.token = start.token;
    this.http = start.http;
    this.subject = start.authorization.subject;
    this.log = deps.audit.session(this.id);
    this.stopLiveness = keepAlive(this.http, settings.liveness, (why) => {
      deps.logger.info({ sessionId: this.id, why }, "tunnel session lost");
      void this.end("lost");
    });
    this.refreshTimer = setInterval(() => void this.refresh(), settings.refreshMs);
    this.refreshTimer.unref();
  }

  /** Opens the session's listeners, records it, sends the welcome; then follows the control stream. */
  static async open(start: SessionStart, settings: SessionSettings, deps: SessionDeps, onEnded: (s: Session) => void): Promise<Session> {
    const session = new Session(start, settings, deps, onEnded);
    deps.metrics?.sessionOpened();
    const served = start.authorization.served;
    session.log.write("ephemera.tunnel.session_opened.v1", {
      sessionId: start.id, subject: session.subject, peer: start.peer, client: start.client, tunnel: settings.tunnel,
      sandboxes: start.sandboxes.length ? start.sandboxes : [...new Set(served.map((s) => s.sandbox))],
    });
    try {
      await session.serve(served, false);
    } catch (err) {
      await session.end("shutdown");
      throw err;
    }
    session.send({ type: "welcome", sessionId: start.id, subject: session.subject, serving: session.serving() });
    start.control.on("close", () => void session.end(session.ended ?? "lost"));
    return session;
  }

  /** A control message from the workstation (the hello was read before). */
  onMessage(message: unknown): void {
    const type = (message as { type?: unknown } | null)?.type;
    if (type === "refresh") void this.refresh();
    else if (type === "bye") void this.end("disconnect");
    else this.deps.logger.info({ sessionId: this.id, type: String(type).slice(0, 40) }, "tunnel: unknown control message ignored");
  }

  serving(): Served[] {
    return [...this.served.values()].map((s) => s.served);
  }

  /** The workstation's answer to an "open": its stream carries the connection, or `error` says why it could not dial. */
  accept(openId: string, stream: ServerHttp2Stream, error: string | undefined): boolean {
    const open = this.pending.get(openId);
    if (!open) return false;
    this.pending.delete(openId);
    clearTimeout(open.timer);
    const carried: Carried = { direction: "to_workstation", sandbox: open.served.sandbox, local: open.served.local, target: open.mapping.toLocal };
    if (error) {
      stream.respond({ ":status": 200 }, { endStream: true });
      open.socket.destroy();
      this.recordUnaccepted(carried, open.startedAt, `the workstation could not connect: ${error}`);
      return true;
    }
    stream.respond({ ":status": 200, "content-type": "application/octet-stream" });
    this.carry(carried, open.socket, stream);
    return true;
  }

  /** A workstation → cluster connection of this session, its target connected. */
  carryDial(target: string, socket: Socket, stream: ServerHttp2Stream): void {
    this.carry({ direction: "to_cluster", sandbox: "", local: "", target }, socket, stream);
  }

  get open(): boolean {
    return !this.ended;
  }

  /** Ends the session once: connections and listeners closed, every end recorded; resolves when all is written. */
  end(reason: SessionEndReason): Promise<void> {
    if (this.endedAll) return this.endedAll;
    this.ended = reason;
    this.endedAll = this.close(reason);
    return this.endedAll;
  }

  /** Re-asks the API (coalesced: one at a time); a token no longer valid ends the session as revoked. */
  refresh(): Promise<void> {
    if (this.ended) return Promise.resolve();
    this.refreshing ??= this.reauthorize().catch((err: unknown) => {
      this.deps.logger.warn({ sessionId: this.id, err: errorMessage(err) }, "tunnel: re-asking the API failed; serving as before");
    }).finally(() => { this.refreshing = undefined; });
    return this.refreshing;
  }

  private async reauthorize(): Promise<void> {
    const next = await this.authorized();
    if (next === "revoked") return void this.end("revoked");
    if (!this.ended) await this.serve(next, true);
  }

  /**
   * What the session may serve now. A named sandbox that went away (404, 400) drops out
   * alone: each is asked on its own then. 401 and 403 revoke; an API that cannot answer keeps
   * what is served.
   */
  private async authorized(): Promise<Served[] | "revoked"> {
    try {
      return (await this.deps.authorize(this.token, this.start.sandboxes)).served;
    } catch (err) {
      if (!isRefusal(err)) throw err;
      if (err.status === 401 || err.status === 403) return "revoked";
      if (err.status === 503) throw err;
      if (this.start.sandboxes.length <= 1) return [];
    }
    const each: Served[] = [];
    for (const sandbox of this.start.sandboxes) {
      try {
        each.push(...(await this.deps.authorize(this.token, [sandbox])).served);
      } catch (err) {
        if (!isRefusal(err)) throw err;
        if (err.status === 401 || err.status === 403) return "revoked";
        if (err.status === 503) each.push(...this.serving().filter((s) => s.sandbox === sandbox));
      }
    }
    return each;
  }

  /** Makes what is served `next`: listeners opened and closed, each change recorded and, after the welcome, told. */
  private async serve(next: Served[], tell: boolean): Promise<void> {
    const wanted = new Map(next.map((s) => [keyOf(s), s]));
    let changed = false;
    for (const [key, current] of this.served) {
      const want = wanted.get(key);
      if (want && sameMappings(want, current.served)) {
        // The same listeners; only the sandbox's status may have moved: told, not re-served.
        if (want.status !== current.served.status) {
          const { status: _was, ...rest } = current.served;
          current.served = want.status ? { ...rest, status: want.status } : rest;
          changed = true;
        }
        continue;
      }
      this.stopServing(key, current, "not-served");
      changed = true;
    }
    for (const [key, served] of wanted) {
      if (this.served.has(key) || this.ended) continue;
      const listeners = await listen(served, this.settings.podAddress, (mapping, socket) => this.onClusterConnection(served, mapping, socket));
      if (this.ended) { closeListeners(listeners); return; }
      this.served.set(key, { served, listeners });
      this.deps.audit.localConnected({
        sandbox: served.sandbox, routingKey: served.routingKey, local: served.local, sessionId: this.id,
        addresses: listeners.map((l) => ({ port: l.mapping.port, address: l.address })), tunnel: this.settings.checkUrl,
      });
      changed = true;
    }
    if (changed && tell) this.send({ type: "serving", serving: this.serving() });
  }

  private stopServing(key: string, current: ServedLocal, reason: string): void {
    this.served.delete(key);
    closeListeners(current.listeners);
    const mine = (c: { sandbox: string; local: string }) => c.sandbox === current.served.sandbox && c.local === current.served.local;
    for (const [id, open] of this.pending) if (mine(open.served)) this.dropPending(id, open, `the local workload is no longer served (${reason})`);
    for (const [b, c] of this.connections) if (mine(c.carried)) b.destroy(`the local workload is no longer served (${reason})`);
    this.deps.audit.localDisconnected({
      sandbox: current.served.sandbox, routingKey: current.served.routingKey, local: current.served.local, sessionId: this.id, reason,
    });
  }

  /** A connection from the cluster: the workstation is asked to accept it, within the bound. */
  private onClusterConnection(served: Served, mapping: Mapping, socket: Socket): void {
    if (this.ended) return void socket.destroy();
    const id = randomBytes(16).toString("base64url");
    const open: PendingOpen = {
      socket, served, mapping, startedAt: new Date(),
      timer: setTimeout(() => this.dropPending(id, open, `the workstation did not accept within ${this.settings.acceptTimeoutMs} ms`),
        this.settings.acceptTimeoutMs),
    };
    this.pending.set(id, open);
    socket.on("error", () => undefined); // its end is recorded on close
    socket.once("close", () => {
      if (this.pending.get(id) === open) this.dropPending(id, open, "the cluster side closed before the workstation accepted");
    });
    this.send({ type: "open", id, sandbox: served.sandbox, local: served.local, port: mapping.port, toLocal: mapping.toLocal });
  }

  private dropPending(id: string, open: PendingOpen, why: string): void {
    if (this.pending.get(id) !== open) return;
    this.pending.delete(id);
    clearTimeout(open.timer);
    open.socket.destroy();
    this.recordUnaccepted({ direction: "to_workstation", sandbox: open.served.sandbox, local: open.served.local, target: open.mapping.toLocal },
      open.startedAt, why);
  }

  private recordUnaccepted(carried: Carried, startedAt: Date, error: string): void {
    this.deps.metrics?.connection(carried.direction);
    this.totals.connections++;
    this.recordEnd(carried, { bytesToWorkstation: 0, bytesToCluster: 0, startedAt, endedAt: new Date(), error });
  }

  private carry(carried: Carried, socket: Socket, stream: ServerHttp2Stream): void {
    this.deps.metrics?.connection(carried.direction);
    this.totals.connections++;
    let resolveEnded!: () => void;
    const ended = new Promise<void>((resolve) => { resolveEnded = resolve; });
    const b = bridge(socket, stream, (end) => {
      this.connections.delete(b);
      this.recordEnd(carried, end);
      resolveEnded();
    });
    this.connections.set(b, { carried, ended });
  }

  private recordEnd(carried: Carried, end: BridgeEnd): void {
    this.totals.toWorkstation += end.bytesToWorkstation;
    this.totals.toCluster += end.bytesToCluster;
    this.deps.metrics?.carried(end.bytesToWorkstation, end.bytesToCluster);
    this.log.write("ephemera.tunnel.connection_closed.v1", {
      sessionId: this.id, ...carried, bytesToWorkstation: end.bytesToWorkstation, bytesToCluster: end.bytesToCluster,
      startedAt: end.startedAt.toISOString(), endedAt: end.endedAt.toISOString(), error: end.error,
    });
  }

  private send(message: ServerMessage): void {
    const control = this.start.control;
    if (!control.destroyed && !control.writableEnded) control.write(line(message));
  }

  private async close(reason: SessionEndReason): Promise<void> {
    this.stopLiveness();
    clearInterval(this.refreshTimer);
    const why = `the session ended (${reason})`;
    for (const [id, open] of this.pending) this.dropPending(id, open, why);
    const ends = [...this.connections].map(([b, c]) => { b.destroy(why); return c.ended; });
    for (const [key, current] of this.served) this.stopServing(key, current, reason);
    await Promise.all(ends);
    if (reason === "lost") {
      this.http.destroy();
    } else {
      if (reason !== "disconnect") this.send({ type: "closing", reason });
      const control = this.start.control;
      if (!control.destroyed && !control.writableEnded) control.end();
      if (reason !== "disconnect" && !this.http.closed) {
        this.http.close();
        // A workstation that does not close its side in time is not waited for.
        setTimeout(() => { if (!this.http.destroyed) this.http.destroy(); }, 1_000).unref();
      }
    }
    this.log.write("ephemera.tunnel.session_closed.v1", {
      sessionId: this.id, reason, connections: this.totals.connections,
      bytesToWorkstation: this.totals.toWorkstation, bytesToCluster: this.totals.toCluster,
    });
    this.deps.metrics?.sessionEnded(reason);
    this.deps.logger.info({ sessionId: this.id, reason, ...this.totals }, "tunnel session closed");
    this.onEnded(this);
    await this.deps.audit.flush();
  }
}
