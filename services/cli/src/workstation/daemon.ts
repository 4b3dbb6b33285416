// The `eph local connect` daemon: holds the session with the tunnel (the client library serves
// the cluster's connections to the locals), runs the HTTP and SOCKS5 proxies and the host
// entries, reconnects with backoff and jitter when the session is lost, and keeps its state
// in the state dir, with a control socket there through which `eph sandbox get-env` asks the
// session for a local's environment. It ends on SIGTERM (`eph local disconnect`) or the abort
// signal: bye to the tunnel, host entries removed, state deleted.
import type { Server } from "node:net";
import { ExponentialBackoff, handleWhen, retry } from "cockatiel";
import { errorMessage } from "@ephemera/kit/errors";
import { serveControl } from "./control.js";
import { createHttpProxy } from "./http-proxy.js";
import { HostListeners, HostsError, hostEntries, writeHosts, type HostEntry } from "./hosts.js";
import { createSocksProxy, type SocksServer } from "./socks-proxy.js";
import { lock, logPath, removeState, unlock, writeState, type DaemonState, type Phase } from "./state.js";
import { isRefusal, type Dial, type OpenOptions, type OpenTunnel, type TunnelSession } from "./tunnel.js";

export interface DaemonOptions {
  dir: string;
  session: OpenOptions;
  open: OpenTunnel;
  /** host:port of each proxy; undefined: not started. */
  httpProxy?: string;
  socksProxy?: string;
  /** The hosts file to keep the Services' entries in (--hosts). */
  hostsFile?: string;
  /** One line per state change (the log file when in the background). */
  log: (line: string) => void;
  /** Told once: connected (with the state) or failed (with why). */
  ready?: (outcome: { state: DaemonState } | { error: string }) => void;
  signal: AbortSignal;
  /** Backoff bounds (ms) of the reconnects. */
  backoff?: { initialDelay: number; maxDelay: number };
  /** How often the cluster's Services are listed again for the host entries (ms). */
  servicesEvery?: number;
}

export class DaemonFailed extends Error {
  override readonly name = "DaemonFailed";
}

/** Runs until stopped (resolves) or until the tunnel refuses the workstation (rejects with DaemonFailed). */
export async function runDaemon(o: DaemonOptions): Promise<void> {
  const holder = lock(o.dir);
  if (holder !== undefined) throw new DaemonFailed(`already connected: eph local connect runs as pid ${holder} (state in ${o.dir})`);
  const daemon = new Daemon(o);
  try {
    await daemon.run();
  } finally {
    await daemon.cleanUp();
    unlock(o.dir);
  }
}

class Daemon {
  private session: TunnelSession | undefined;
  private state: DaemonState;
  private readonly servers: Array<Server | SocksServer> = [];
  private readonly hosts: HostListeners;
  private hostEntries: HostEntry[] = [];
  /** Why the current session ended, once it has. */
  private ended: Promise<string> = new Promise(() => {});
  private readonly dial: Dial = (host, port) =>
    this.session ? this.session.dial(host, port) : Promise.reject(new Error(`not connected to the tunnel (${this.state.phase})`));

  constructor(private readonly o: DaemonOptions) {
    this.state = {
      pid: process.pid, tunnel: o.session.address, phase: "connecting", since: new Date().toISOString(),
      serving: [], proxies: {}, log: logPath(o.dir), ...(o.hostsFile ? { hostsFile: o.hostsFile } : {}),
    };
    this.hosts = new HostListeners(this.dial, (m) => o.log(`host entry: ${m}`));
  }

  async run(): Promise<void> {
    this.save();
    try {
      await this.startControl();
      await this.startProxies();
      await this.connect();
    } catch (err) {
      const error = errorMessage(err);
      this.enter("failed", { lastError: error });
      this.o.ready?.({ error });
      throw new DaemonFailed(error, { cause: err });
    }
    this.o.ready?.({ state: this.state });
    const timer = setInterval(() => void this.refreshHosts(), this.o.servicesEvery ?? 30_000);
    try {
      await this.holdSession();
    } finally {
      clearInterval(timer);
    }
  }

  /** Until stopped: each lost session is followed by reconnects; a refusal ends the daemon. */
  private async holdSession(): Promise<void> {
    const policy = retry(handleWhen((err) => !isRefusal(err) && !this.o.signal.aborted), {
      maxAttempts: Number.MAX_SAFE_INTEGER,
      backoff: new ExponentialBackoff(this.o.backoff ?? { initialDelay: 500, maxDelay: 30_000 }),
    });
    policy.onRetry(({ delay, ...why }) => {
      const error = "error" in why ? errorMessage(why.error) : "unknown";
      this.enter("reconnecting", { attempt: (this.state.attempt ?? 0) + 1, lastError: error });
      this.o.log(`reconnect attempt ${this.state.attempt} failed: ${error}; next in ${Math.round(delay)} ms`);
    });
    while (!this.o.signal.aborted) {
      const lost = await this.lost();
      if (this.o.signal.aborted) return;
      this.enter("reconnecting", { attempt: 0, lastError: lost });
      try {
        await policy.execute(() => this.connect(), this.o.signal);
      } catch (err) {
        if (this.o.signal.aborted) return;
        const error = errorMessage(err);
        this.enter("failed", { lastError: error });
        throw new DaemonFailed(error, { cause: err });
      }
    }
  }

  /** Resolves with why the current session ended, or when the daemon is stopped. */
  private lost(): Promise<string> {
    return new Promise((resolve) => {
      const stopped = () => resolve("stopped");
      this.o.signal.addEventListener("abort", stopped, { once: true });
      void this.ended.then((why) => {
        this.o.signal.removeEventListener("abort", stopped);
        resolve(why);
      });
    });
  }

  private async connect(): Promise<void> {
    const session = await this.o.open(this.o.session);
    if (this.o.signal.aborted) {
      await session.close();
      return;
    }
    this.session = session;
    this.ended = new Promise((resolve) => session.on("closed", (why) => {
      if (this.session === session) this.session = undefined;
      resolve(why.error ? `${why.reason}: ${errorMessage(why.error)}` : why.reason);
    }));
    session.on("serving", (serving) => {
      this.state = { ...this.state, serving };
      this.save();
      this.o.log(`serving ${describeServing(serving)}`);
    });
    this.state = { ...this.state, sessionId: session.sessionId, serving: session.serving };
    this.enter("connected", { attempt: undefined, lastError: undefined });
    this.o.log(`serving ${describeServing(session.serving)}`);
    await this.refreshHosts();
  }

  /** control.sock: other eph commands ask the session for a local's environment (eph sandbox get-env). */
  private async startControl(): Promise<void> {
    const server = await serveControl(this.o.dir, {
      environment: (sandbox, local) => {
        if (!this.session) return Promise.reject(Object.assign(new Error(`not connected to the tunnel (${this.state.phase})`), { status: 503 }));
        return this.session.environment(sandbox, local);
      },
    });
    this.servers.push(server);
  }

  private async startProxies(): Promise<void> {
    const onError = (m: string) => this.o.log(`proxy: ${m}`);
    if (this.o.httpProxy) {
      this.state.proxies.http = await this.listen(createHttpProxy(this.dial, onError), this.o.httpProxy, "the HTTP proxy");
    }
    if (this.o.socksProxy) {
      this.state.proxies.socks = await this.listen(createSocksProxy(this.dial, onError), this.o.socksProxy, "the SOCKS5 proxy");
    }
  }

  private async listen(server: Server | SocksServer, address: string, what: string): Promise<string> {
    const m = /^(.*):(\d+)$/.exec(address);
    if (!m) throw new DaemonFailed(`${what}: "${address}" is not host:port`);
    const host = m[1]!.replace(/^\[(.*)\]$/, "$1");
    await new Promise<void>((resolve, reject) => {
      server.on("error", reject);
      server.listen(Number(m[2]), host, () => resolve());
    }).catch((err: unknown) => {
      throw new DaemonFailed(`cannot listen on ${address} for ${what}: ${errorMessage(err)}`, { cause: err });
    });
    this.servers.push(server);
    const bound = server.address();
    const port = typeof bound === "object" && bound ? bound.port : Number(m[2]);
    return `${host.includes(":") ? `[${host}]` : host}:${port}`;
  }

  /** The cluster's Services into the hosts file and the listeners (--hosts). */
  private async refreshHosts(): Promise<void> {
    const file = this.o.hostsFile;
    if (!file || !this.session) return;
    try {
      const entries = hostEntries(await this.session.services());
      await writeHosts(file, entries);
      await this.hosts.update(entries);
      if (JSON.stringify(entries) !== JSON.stringify(this.hostEntries)) this.o.log(`host entries: ${entries.length} Services in ${file}`);
      this.hostEntries = entries;
      this.state = { ...this.state, hosts: entries.map(({ names, address, ports }) => ({ names, address, ports })), hostsError: undefined };
    } catch (err) {
      const message = errorMessage(err);
      if (this.state.hostsError !== message) this.o.log(err instanceof HostsError ? message : `host entries: ${message}`);
      this.state = { ...this.state, hostsError: message };
    }
    this.save();
  }

  private enter(phase: Phase, fields: Partial<DaemonState>): void {
    const changed = phase !== this.state.phase;
    this.state = { ...this.state, ...fields, phase, since: changed ? new Date().toISOString() : this.state.since };
    this.save();
    if (!changed) return;
    const detail = phase === "connected" ? ` to ${this.state.tunnel} (session ${this.state.sessionId ?? "?"})` : this.state.lastError ? `: ${this.state.lastError}` : "";
    this.o.log(`${phase}${detail}`);
  }

  private save(): void {
    writeState(this.o.dir, this.state);
  }

  async cleanUp(): Promise<void> {
    const session = this.session;
    this.session = undefined;
    await session?.close().catch((err: unknown) => this.o.log(`bye to the tunnel: ${errorMessage(err)}`));
    if (this.o.hostsFile && this.hostEntries.length) {
      await writeHosts(this.o.hostsFile, []).catch((err: unknown) => this.o.log(errorMessage(err)));
    }
    await this.hosts.close();
    await Promise.all(this.servers.map((s) => new Promise((resolve) => s.close(() => resolve(undefined)))));
    if (this.state.phase !== "failed") removeState(this.o.dir);
    this.o.log("disconnected");
  }
}

export function describeServing(serving: DaemonState["serving"]): string {
  if (!serving.length) return "no local workloads";
  return serving.map((s) => `${s.sandbox}/${s.local} (${s.mappings.map((m) => `${m.port}→${m.toLocal}`).join(", ")})`).join("; ");
}
