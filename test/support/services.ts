// ephemera's four built services as separate child processes, the way a test that kills
// and restarts them needs them: each can be SIGKILLed and started again on its own, each
// keeps its recent output in a ring buffer across restarts, and one that dies without
// being asked is recorded as a crash and started again (as any supervisor would), so the
// test sees both the crash and whether the system recovers from it.
import { join } from "node:path";
import { checkHealth, waitFor } from "@ephemera/kit";
import { ManagedProcess, RingBuffer, describeExit } from "./processes.js";

export const SERVICE_NAMES = ["iocontext", "scheduler", "runner", "sandbox"] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];

const ROOT = join(__dirname, "..", "..");

export interface ServicesOptions {
  /** NATS_URL, REDIS_URL, EPHEMERA_PREFIX, EPHEMERA_API_LISTEN, EPHEMERA_IOCONTEXT_LISTEN, …: what every service gets. */
  env: Record<string, string>;
  readyTimeoutMs?: number;
  logLines?: number;
}

export interface Crash {
  service: ServiceName;
  pid: number;
  at: number;
  how: string;
  /** The service's last lines before it died. */
  tail: string;
}

/** The environment of the services: this process's without any EPHEMERA_* of the caller's shell, plus `env`. */
export function serviceEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("EPHEMERA_") && !k.startsWith("JEST")));
  // Metrics on free ports: a service run alone takes 9400–9403, which suites running at once would fight over.
  return {
    ...inherited, EPHEMERA_CLUSTER: "local", EPHEMERA_SCHEDULER_LISTEN: "127.0.0.1:0", EPHEMERA_RUNNER_LISTEN: "127.0.0.1:0",
    EPHEMERA_METRICS_LISTEN: "127.0.0.1:0", EPHEMERA_ROUTES_LISTEN: "127.0.0.1:0", EPHEMERA_ROUTES_HTTP_LISTEN: "127.0.0.1:0", EPHEMERA_GATEWAY_LISTEN: "127.0.0.1:0", EPHEMERA_JOBS_LISTEN: "127.0.0.1:0", EPHEMERA_TUNNEL_LISTEN: "127.0.0.1:0", EPHEMERA_CONSOLE_LISTEN: "127.0.0.1:0", ...env,
  };
}

export class Services {
  readonly crashes: Crash[] = [];
  private readonly logs = new Map<ServiceName, RingBuffer>();
  private readonly procs = new Map<ServiceName, ManagedProcess>();
  private readonly restarts = new Map<ServiceName, NodeJS.Timeout>();
  private readonly starting = new Set<ServiceName>();
  private readonly recentCrashes = new Map<ServiceName, number[]>();
  private stopping = false;

  private constructor(private readonly options: ServicesOptions) {
    for (const s of SERVICE_NAMES) this.logs.set(s, new RingBuffer(options.logLines ?? 3000));
  }

  /** Starts all four at once (as `pnpm start` does) and waits until each answers its health check. */
  static async start(options: ServicesOptions): Promise<Services> {
    const services = new Services(options);
    try {
      await Promise.all(SERVICE_NAMES.map((s) => services.start(s)));
    } catch (err) {
      await services.stop();
      throw err;
    }
    return services;
  }

  get api(): string {
    return this.options.env["EPHEMERA_API_LISTEN"]!;
  }

  pid(service: ServiceName): number | undefined {
    const p = this.procs.get(service);
    return p?.running ? p.pid : undefined;
  }

  log(service: ServiceName): RingBuffer {
    return this.logs.get(service)!;
  }

  /** Starts the service and waits until it reports SERVING on its gRPC health endpoint. */
  async start(service: ServiceName): Promise<void> {
    const current = this.procs.get(service);
    if (current?.running) throw new Error(`${service} is already running (pid ${current.pid})`);
    const p = this.spawn(service);
    const fixed = fixedPort(this.options.env, service);
    p.log.push(`[harness] started ${service} (pid ${p.pid})`);
    this.starting.add(service);
    try {
      await waitFor(async () => {
        if (p.exit) throw new Error(`${service} exited during start-up: ${describeExit(p.exit)}`);
        // The service's own word that it listens there first: a fixed port may answer for another process.
        const port = listeningPort(p.log, p.pid);
        if (port === undefined) return false;
        if (fixed !== undefined && port !== fixed) throw new Error(`${service} listens on ${port}, not on ${fixed} as told`);
        return servingHealth(`127.0.0.1:${port}`);
      }, { timeoutMs: this.options.readyTimeoutMs ?? 30_000, intervalMs: 100, what: `${service} (pid ${p.pid}) to report SERVING` });
    } catch (err) {
      if (p.running) await p.stop("SIGKILL"); // hung in start-up: not left half-started
      throw new Error(`${(err as Error).message}\n${this.tail(service, 25)}`, { cause: err });
    } finally {
      this.starting.delete(service);
    }
  }

  /** Waits until all four run and none is (re)starting: after a crash, the supervisor's restart is done. */
  async ready(timeoutMs: number): Promise<void> {
    await waitFor(() => SERVICE_NAMES.every((s) => this.procs.get(s)?.running && !this.restarts.has(s) && !this.starting.has(s)), {
      timeoutMs, intervalMs: 100, what: `every service running (${SERVICE_NAMES.map((s) => `${s}: ${this.pid(s) ?? "down"}`).join(", ")})`,
    });
  }

  /** SIGKILL: no shutdown hooks run, in-flight work is cut off where it is. */
  async kill(service: ServiceName): Promise<number> {
    const p = this.procs.get(service);
    if (!p?.running) throw new Error(`${service} is not running, so it cannot be killed`);
    p.log.push(`[harness] SIGKILL ${service} (pid ${p.pid})`);
    await p.stop("SIGKILL");
    return p.pid;
  }

  /** SIGTERM to all (SIGKILL after the grace period); stops restarting crashed ones. Returns how each ended. */
  async stop(graceMs = 20_000): Promise<Map<ServiceName, string>> {
    this.stopping = true;
    for (const t of this.restarts.values()) clearTimeout(t);
    const ends = new Map<ServiceName, string>();
    await Promise.all([...this.procs].map(async ([service, p]) => {
      if (!p.running) return;
      ends.set(service, describeExit(await p.stop("SIGTERM", graceMs)));
    }));
    return ends;
  }

  /** PIDs of the services now running. */
  pids(): number[] {
    return [...this.procs.values()].filter((p) => p.running).map((p) => p.pid);
  }

  /** Crashes recorded since `since` (ms since epoch). */
  crashesSince(since: number): Crash[] {
    return this.crashes.filter((c) => c.at >= since);
  }

  tail(service: ServiceName, n: number, since = 0): string {
    return this.log(service).lines(since).slice(-n).map((l) => `  ${service}| ${formatLogLine(l.at, l.line)}`).join("\n");
  }

  /** Lines of every service that contain one of `needles` (or are warnings and errors, with `problems`), oldest first. */
  grep(needles: string[], { since = 0, max = 40, problems = false } = {}): string {
    const hits: Array<{ at: number; service: ServiceName; line: string }> = [];
    for (const service of SERVICE_NAMES) {
      for (const l of this.log(service).lines(since)) {
        if (needles.some((n) => l.line.includes(n)) || (problems && isProblem(l.line))) hits.push({ ...l, service });
      }
    }
    hits.sort((a, b) => a.at - b.at);
    return hits.slice(-max).map((h) => `  ${h.service}| ${formatLogLine(h.at, h.line)}`).join("\n");
  }

  private spawn(service: ServiceName): ManagedProcess {
    const p: ManagedProcess = new ManagedProcess(service, {
      command: process.execPath,
      args: [join(ROOT, "services", service, "dist", "main.js")],
      env: serviceEnv(this.options.env),
      log: this.log(service),
      onExit: (exit) => {
        if (p.expectingExit || this.stopping) return;
        this.crashes.push({ service, pid: p.pid, at: Date.now(), how: describeExit(exit), tail: this.tail(service, 20) });
        this.scheduleRestart(service);
      },
    });
    this.procs.set(service, p);
    return p;
  }

  // A supervisor's restart, with a backoff so a service that cannot start does not spin.
  private scheduleRestart(service: ServiceName): void {
    const now = Date.now();
    const recent = (this.recentCrashes.get(service) ?? []).filter((t) => now - t < 60_000);
    recent.push(now);
    this.recentCrashes.set(service, recent);
    const backoff = Math.min(5_000, 500 * 2 ** (recent.length - 1));
    this.log(service).push(`[harness] ${service} crashed; restarting it in ${backoff} ms`);
    this.restarts.set(service, setTimeout(() => {
      this.restarts.delete(service);
      if (this.stopping || this.procs.get(service)?.running) return;
      this.start(service).catch((err: unknown) => this.log(service).push(`[harness] restart of ${service} failed: ${(err as Error).message.split("\n")[0]}`));
    }, backoff));
  }
}

function fixedPort(env: Record<string, string>, service: ServiceName): number | undefined {
  const listen = service === "sandbox" ? env["EPHEMERA_API_LISTEN"] : service === "iocontext" ? env["EPHEMERA_IOCONTEXT_LISTEN"] : undefined;
  const port = Number(listen?.split(":").pop());
  return port > 0 ? port : undefined;
}

/** The port a service bound, from its "grpc listening" log line (services told to listen on port 0). */
export function listeningPort(log: RingBuffer, pid: number): number | undefined {
  for (const { line } of log.lines().reverse()) {
    if (!line.includes("grpc listening")) continue;
    try {
      const rec = JSON.parse(line) as { pid?: number; port?: number };
      if (rec.pid === pid && rec.port) return rec.port;
    } catch { /* not JSON */ }
  }
  return undefined;
}


/** One health check with a 1 s deadline: true when the server reports SERVING (field 1 = 1). */
export function servingHealth(address: string): Promise<boolean> {
  return checkHealth(address);
}

const LEVELS: Record<number, string> = { 10: "TRACE", 20: "DEBUG", 30: "INFO", 40: "WARN", 50: "ERROR", 60: "FATAL" };
const OMIT = new Set(["level", "time", "pid", "hostname", "name", "service", "msg", "err"]);

function isProblem(line: string): boolean {
  try {
    return ((JSON.parse(line) as { level?: number }).level ?? 0) >= 40;
  } catch {
    return !line.startsWith("[harness]") && /error|fatal|panic|exception/i.test(line);
  }
}

/** A pino line as `time LEVEL msg k=v … err=message`; anything else as it is. */
export function formatLogLine(at: number, line: string): string {
  let rec: Record<string, unknown>;
  try {
    rec = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return `${clock(at)} ${line}`.slice(0, 500);
  }
  const fields = Object.entries(rec).filter(([k]) => !OMIT.has(k)).map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`);
  const err = rec["err"] as { type?: string; message?: string } | undefined;
  if (err) fields.push(`err=${err.type ?? "Error"}: ${err.message ?? ""}`);
  const time = typeof rec["time"] === "number" ? rec["time"] : at;
  return `${clock(time)} ${LEVELS[rec["level"] as number] ?? "?"} ${String(rec["msg"] ?? "")} ${fields.join(" ")}`.slice(0, 500);
}

const clock = (ms: number) => new Date(ms).toISOString().slice(11, 23);
