// `eph local connect | status | disconnect`: the workstation's side of local workloads.
// `connect` starts the daemon (daemon.ts) in the background, re-running eph with
// --foreground and its output in the state dir's log, and returns once it is connected;
// `status` reads the state the daemon keeps; `disconnect` ends it with SIGTERM.
import { spawn } from "node:child_process";
import { setTimeout as delay } from "node:timers/promises";
import { closeSync, mkdirSync, openSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { Option, type Command } from "commander";
import { errorMessage } from "@ephemera/kit/errors";
import type { Context } from "../context.js";
import { OperationFailed, UsageError } from "../errors.js";
import { outputOption } from "../options.js";
import { formatDoc, type OutputFormat } from "../render.js";
import { alive, logPath, readState, stateDir, unlock, removeState, type DaemonState } from "./state.js";
import type { OpenOptions, OpenTunnel } from "./tunnel.js";

export const DEFAULT_TUNNEL = "127.0.0.1:7785";
export const DEFAULT_HTTP_PROXY = "127.0.0.1:7786";
export const DEFAULT_SOCKS_PROXY = "127.0.0.1:7787";
const DEFAULT_HOSTS_FILE = "/etc/hosts";
/** How long `connect` waits for the daemon's first session, and `disconnect` for its exit. */
const CONNECT_TIMEOUT_MS = 30_000;
const DISCONNECT_TIMEOUT_MS = 15_000;

/** `local status` answers with its exit code, as `sandbox get-status` does. */
export const LOCAL_STATUS_EXIT = { connected: 0, "not-connected": 1, reconnecting: 2 } as const;

interface ConnectOpts {
  tunnel?: string;
  sandbox: string[];
  foreground?: boolean;
  httpProxy: string;
  socks: string;
  proxies: boolean;
  hosts?: boolean;
  hostsFile?: string;
  insecure?: boolean;
  ca?: string;
  caServerName?: string;
}

export function registerLocal(program: Command, ctx: Context, open: () => Promise<OpenTunnel>): void {
  const local = program.command("local").description("serve your sandboxes' local workloads from this machine, and reach the cluster from it");
  // Set before status parses its arguments: its usage errors must not exit 1 or 2, which are answers.
  local.hook("preSubcommand", (_local, sub) => {
    if (sub.name() === "status") ctx.answering = true;
  });
  local.command("connect")
    .description("connect to the tunnel: serve every local workload of your sandboxes at its toLocal address, and proxy to the cluster's Services")
    .option("--tunnel <address>", `the tunnel's host:port (default: $EPHEMERA_TUNNEL or ${DEFAULT_TUNNEL})`)
    .option("--sandbox <name>", "serve only this sandbox's local workloads (repeatable; default: every sandbox you may serve)", (v: string, all: string[]) => [...all, v], [])
    .option("--foreground", "stay in the foreground, logging to stderr, until interrupted")
    .option("--http-proxy <address>", "listen address of the HTTP proxy into the cluster", DEFAULT_HTTP_PROXY)
    .option("--socks <address>", "listen address of the SOCKS5 proxy into the cluster", DEFAULT_SOCKS_PROXY)
    .option("--no-proxies", "start neither proxy")
    .option("--hosts", "map each cluster Service's <svc>.<ns>.svc name to a loopback address in /etc/hosts (needs root)")
    .addOption(new Option("--hosts-file <file>").hideHelp().env("EPHEMERA_HOSTS_FILE"))
    .option("--ca <file>", "connect over TLS, trusting this CA's PEM certificate ($EPHEMERA_TUNNEL_CA)")
    .option("--ca-server-name <name>", "name expected on the tunnel's certificate, when not the address's host")
    .option("--insecure", "connect without TLS even to a tunnel that is not on this machine (h2c; the token travels in plaintext)")
    .action(async (opts: ConnectOpts) => {
      const dir = stateDir(ctx.io.env);
      const session = sessionOptions(ctx, opts);
      if (opts.foreground) return foreground(ctx, dir, session, opts, await open());
      return background(ctx, dir, session, opts);
    });
  outputOption(local.command("status"))
    .description("the connection: connected since…, reconnecting, or not connected; what is served and the proxies (exit 0 connected, 1 not connected, 2 reconnecting)")
    .action((opts: { output?: OutputFormat }) => status(ctx, stateDir(ctx.io.env), opts.output));
  local.command("disconnect")
    .description("end the connection: the daemon says bye to the tunnel, removes its host entries and its state")
    .action(() => disconnect(ctx, stateDir(ctx.io.env)));
}

function sessionOptions(ctx: Context, opts: ConnectOpts): OpenOptions {
  const address = opts.tunnel || ctx.io.env["EPHEMERA_TUNNEL"] || DEFAULT_TUNNEL;
  if (!/^(\[[^\]]+\]|[^:]+):\d{1,5}$/.test(address)) throw new UsageError(`--tunnel "${address}": give host:port`);
  const caFile = opts.ca ?? ctx.io.env["EPHEMERA_TUNNEL_CA"];
  if (caFile && opts.insecure) throw new UsageError("--insecure and --ca: give one (--ca connects over TLS)");
  let tls: OpenOptions["tls"];
  if (caFile) {
    let ca: Buffer;
    try {
      ca = readFileSync(caFile);
    } catch (err) {
      throw new UsageError(`--ca "${caFile}": ${errorMessage(err)}`, { cause: err });
    }
    tls = { ca, ...(opts.caServerName ? { servername: opts.caServerName } : {}) };
  } else if (!opts.insecure && !isLoopbackAddress(address)) {
    tls = true;
  }
  return {
    address, tls, ...(ctx.token ? { token: ctx.token } : {}),
    ...(opts.sandbox.length ? { sandboxes: opts.sandbox } : {}),
  };
}

function isLoopbackAddress(address: string): boolean {
  const host = address.replace(/:\d+$/, "").replace(/^\[(.*)\]$/, "$1");
  return host === "localhost" || host === "::1" || host.startsWith("127.");
}

/** The daemon itself: runs until SIGTERM, SIGINT or the caller's abort signal. */
async function foreground(ctx: Context, dir: string, session: OpenOptions, opts: ConnectOpts, open: OpenTunnel): Promise<void> {
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.on("SIGTERM", onSignal).on("SIGINT", onSignal);
  ctx.io.signal?.addEventListener("abort", onSignal, { once: true });
  // The daemon's code (proxies, retry policy) loads with it: status and disconnect stay light.
  const { runDaemon } = await import("./daemon.js");
  try {
    await runDaemon({
      dir, session, open, signal: stop.signal,
      ...(opts.proxies ? { httpProxy: opts.httpProxy, socksProxy: opts.socks } : {}),
      ...(opts.hosts ? { hostsFile: opts.hostsFile || DEFAULT_HOSTS_FILE } : {}),
      log: (line) => ctx.err(`${new Date().toISOString()} ${line}`),
      backoff: backoffFromEnv(ctx.io.env),
      ready: (outcome) => {
        if ("state" in outcome) ctx.out(summary(outcome.state));
        // The background `connect` waits for this, then leaves the daemon on its own.
        if (process.send && process.connected) process.send(outcome, () => process.disconnect());
      },
    });
  } finally {
    process.off("SIGTERM", onSignal).off("SIGINT", onSignal);
  }
}

/** EPHEMERA_LOCAL_BACKOFF=initial,max (ms): how soon reconnects are tried (tests shorten it). */
function backoffFromEnv(env: Record<string, string | undefined>): { initialDelay: number; maxDelay: number } | undefined {
  const m = /^(\d+),(\d+)$/.exec(env["EPHEMERA_LOCAL_BACKOFF"] ?? "");
  return m ? { initialDelay: Number(m[1]), maxDelay: Number(m[2]) } : undefined;
}

async function background(ctx: Context, dir: string, session: OpenOptions, opts: ConnectOpts): Promise<void> {
  const running = liveState(dir);
  if (running) throw new OperationFailed(`already connected: eph local connect runs as pid ${running.pid} (tunnel ${running.tunnel}); eph local disconnect ends it`);
  const self = ctx.io.self;
  if (!self?.length) throw new UsageError("eph runs in-process here and cannot start itself in the background: add --foreground");
  const args = ["local", "connect", "--foreground", "--tunnel", session.address, ...opts.sandbox.flatMap((s) => ["--sandbox", s])];
  if (opts.proxies) args.push("--http-proxy", opts.httpProxy, "--socks", opts.socks);
  else args.push("--no-proxies");
  if (opts.hosts) args.push("--hosts", ...(opts.hostsFile ? ["--hosts-file", opts.hostsFile] : []));
  if (opts.ca ?? ctx.io.env["EPHEMERA_TUNNEL_CA"]) args.push("--ca", (opts.ca ?? ctx.io.env["EPHEMERA_TUNNEL_CA"])!);
  if (opts.caServerName) args.push("--ca-server-name", opts.caServerName);
  if (opts.insecure) args.push("--insecure");
  // The token goes through the environment: a command line is visible to every user.
  const env = { ...ctx.io.env, ...(ctx.token ? { EPHEMERA_TOKEN: ctx.token } : {}) };
  rmSync(join(dir, "state.json"), { force: true });
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const log = openSync(logPath(dir), "a", 0o600);
  const child = spawn(self[0]!, [...self.slice(1), ...args], { detached: true, stdio: ["ignore", log, log, "ipc"], env });
  closeSync(log);
  const outcome = await new Promise<{ state: DaemonState } | { error: string }>((resolve) => {
    const timer = setTimeout(() => {
      child.kill("SIGTERM");
      resolve({ error: `not connected within ${CONNECT_TIMEOUT_MS / 1000}s (see ${logPath(dir)})` });
    }, CONNECT_TIMEOUT_MS);
    child.on("message", (m: { state: DaemonState } | { error: string }) => {
      clearTimeout(timer);
      resolve(m);
    });
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      resolve({ error: readState(dir)?.lastError ?? `the daemon ended (${signal ?? `exit ${code}`}) before connecting; see ${logPath(dir)}` });
    });
  });
  child.removeAllListeners();
  if (child.connected) child.disconnect();
  child.unref();
  if ("error" in outcome) throw new OperationFailed(outcome.error);
  ctx.out(summary(outcome.state));
}

/** The state of a daemon that is still running; a state whose pid is gone is stale. */
function liveState(dir: string): DaemonState | undefined {
  const state = readState(dir);
  return state && state.phase !== "failed" && alive(state.pid) ? state : undefined;
}

function summary(state: DaemonState): string {
  const lines = [`connected to ${state.tunnel} (session ${state.sessionId ?? "?"}, pid ${state.pid})`];
  lines.push(...servingLines(state));
  lines.push(...proxyLines(state));
  lines.push(`log: ${state.log}`);
  return `${lines.join("\n")}\n`;
}

function servingLines(state: DaemonState): string[] {
  if (!state.serving.length) return ["serving: no local workloads (none of your sandboxes has a local entry)"];
  return ["serving:", ...state.serving.flatMap((s) => s.mappings.map((m) => `  ${s.sandbox}/${s.local}  port ${m.port} → ${m.toLocal}  (routing key ${s.routingKey}${s.status ? `; sandbox ${s.status}` : ""})`))];
}

function proxyLines(state: DaemonState): string[] {
  const lines: string[] = [];
  if (state.proxies.http) lines.push(`HTTP proxy:   http://${state.proxies.http}  (e.g. curl -x http://${state.proxies.http} http://<svc>.<ns>.svc:<port>/)`);
  if (state.proxies.socks) lines.push(`SOCKS5 proxy: ${state.proxies.socks}  (e.g. curl --socks5-hostname ${state.proxies.socks} …)`);
  if (state.hosts) lines.push(`host entries: ${state.hosts.length} Services in ${state.hostsFile ?? DEFAULT_HOSTS_FILE}`);
  if (state.hostsError) lines.push(`host entries: ${state.hostsError}`);
  return lines;
}

type Status = keyof typeof LOCAL_STATUS_EXIT;

function status(ctx: Context, dir: string, format: OutputFormat | undefined): void {
  const state = readState(dir);
  const running = state && alive(state.pid) && state.phase !== "failed" ? state : undefined;
  const s: Status = !running ? "not-connected" : running.phase === "connected" ? "connected" : "reconnecting";
  ctx.exitCode = LOCAL_STATUS_EXIT[s];
  if (format) {
    const doc = running ? { status: s, ...running } : { status: s, ...(state ? { last: { ...state, running: false } } : {}) };
    ctx.out(formatDoc(doc, format));
    return;
  }
  if (!running) {
    const why = !state ? "" : state.phase === "failed" ? ` (the last connect failed: ${state.lastError ?? "unknown"})`
      : ` (pid ${state.pid} ended without disconnecting: its state is stale; eph local connect takes over, eph local disconnect cleans up)`;
    ctx.out(`not connected${why}\n`);
    return;
  }
  const head = running.phase === "connected" ? `connected to ${running.tunnel} since ${running.since} (session ${running.sessionId ?? "?"}, pid ${running.pid})`
    : running.phase === "connecting" ? `connecting to ${running.tunnel} since ${running.since} (pid ${running.pid})`
    : `reconnecting to ${running.tunnel} since ${running.since} (attempt ${running.attempt ?? 0}, last error: ${running.lastError ?? "none"}; pid ${running.pid})`;
  ctx.out(`${[head, ...servingLines(running), ...proxyLines(running), `log: ${running.log}`].join("\n")}\n`);
}

async function disconnect(ctx: Context, dir: string): Promise<void> {
  const state = readState(dir);
  if (!state) {
    ctx.out("not connected\n");
    return;
  }
  if (!alive(state.pid)) {
    // Killed (SIGKILL) or failed: what it left behind goes now.
    if (state.hostsFile && state.hosts?.length) await (await import("./hosts.js")).writeHosts(state.hostsFile, []);
    removeState(dir);
    unlock(dir);
    ctx.out(`not connected (cleaned up after pid ${state.pid}, which had ended)\n`);
    return;
  }
  process.kill(state.pid, "SIGTERM");
  // Another process's exit cannot be awaited: looked at every 50 ms, up to the deadline.
  const deadline = Date.now() + DISCONNECT_TIMEOUT_MS;
  while (alive(state.pid)) {
    if (Date.now() > deadline) throw new OperationFailed(`eph local connect (pid ${state.pid}) did not exit within ${DISCONNECT_TIMEOUT_MS / 1000}s of SIGTERM; see ${state.log}`);
    await delay(50);
  }
  ctx.out(`disconnected from ${state.tunnel} (pid ${state.pid} ended)\n`);
}
