// The real system for `pnpm bench`: a NATS (JetStream) and a Redis of the bench's own on
// free ports, and ephemera's four built services as separate processes (so each one's CPU
// and memory can be read from /proc), under a prefix of the bench's. Everything started
// here is remembered and stopped by stopAll(), on success, failure or Ctrl-C alike.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { checkHealth, waitFor } from "../../services/kit/dist/client.js";
import { defaultWorkRoot } from "../../services/runner/dist/driver/workroot.js";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const SERVICES = ["iocontext", "scheduler", "runner", "sandbox"];
const CLK_TCK = 100; // USER_HZ: what /proc/<pid>/stat counts in on Linux

const live = new Set();

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

export const newPrefix = (tag) => `bench${tag}${randomBytes(3).toString("hex")}`;

/** A child process whose last output lines are kept (for the error when it fails), stopped by PID. */
function child(name, command, args, env, onLine) {
  const p = spawn(command, args, { env, stdio: ["ignore", "pipe", "pipe"] });
  const tail = [];
  const exited = new Promise((resolve) => p.on("exit", (code, signal) => resolve({ code, signal })));
  const proc = {
    name, pid: p.pid, tail,
    get running() { return p.exitCode === null && p.signalCode === null; },
    async stop(signal = "SIGTERM", graceMs = 10_000) {
      if (proc.running) {
        p.kill(signal);
        const t = setTimeout(() => { if (proc.running) p.kill("SIGKILL"); }, graceMs);
        await exited;
        clearTimeout(t);
      }
      live.delete(proc);
    },
  };
  for (const stream of [p.stdout, p.stderr]) {
    let rest = "";
    stream.on("data", (d) => {
      const lines = (rest + d).split("\n");
      rest = lines.pop();
      for (const line of lines) {
        tail.push(line);
        if (tail.length > 40) tail.shift();
        onLine?.(line);
      }
    });
  }
  live.add(proc);
  return proc;
}

async function startServer(name, command, args, ready, timeoutMs = 20_000) {
  let up = false;
  const p = child(name, command, args, process.env, (line) => { if (ready.test(line)) up = true; });
  try {
    await waitFor(() => {
      if (!p.running) throw new Error(`${name} exited during start-up:\n${p.tail.join("\n")}`);
      return up;
    }, { timeoutMs, intervalMs: 20, what: `${name} to accept connections` });
  } catch (err) {
    await p.stop("SIGKILL");
    throw err;
  }
  return p;
}

/** nats-server with JetStream and redis-server (no persistence), data under `dir`. */
export async function startServers(dir) {
  mkdirSync(join(dir, "nats"), { recursive: true });
  const natsPort = await freePort();
  const monitorPort = await freePort();
  const nats = await startServer("nats-server", "/usr/sbin/nats-server",
    ["-a", "127.0.0.1", "-p", String(natsPort), "-m", String(monitorPort), "-js", "-sd", join(dir, "nats")], /Server is ready/);
  const { redis, redisUrl } = await startRedis(join(dir, "redis"));
  return { nats, redis, natsUrl: `nats://127.0.0.1:${natsPort}`, natsMonitorUrl: `http://127.0.0.1:${monitorPort}`, redisUrl };
}

/** Messages the NATS server has taken in and sent out since it started (its /varz): the bench's own server, so a figure's difference is its own. */
export async function natsMessages(natsMonitorUrl) {
  const res = await fetch(`${natsMonitorUrl}/varz`, { signal: AbortSignal.timeout(5_000) });
  if (!res.ok) throw new Error(`GET ${natsMonitorUrl}/varz: ${res.status}`);
  const v = await res.json();
  return { in: v.in_msgs, out: v.out_msgs };
}

/** A redis-server of its own (no persistence) on a free port, data under `dir`: one a figure may stop. */
export async function startRedis(dir) {
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const redis = await startServer("redis-server", "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir], /Ready to accept connections/);
  return { redis, redisUrl: `redis://127.0.0.1:${port}` };
}

/** The services' environment: this process's without any EPHEMERA_* of the caller's shell, plus `extra`. */
export function serviceEnv(extra) {
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("EPHEMERA_")));
  // Metrics on free ports: run alone, each service would take its fixed one (9400–9403).
  return { ...inherited, EPHEMERA_CLUSTER: "local", LOG_LEVEL: "warn", EPHEMERA_METRICS_LISTEN: "127.0.0.1:0", EPHEMERA_ROUTES_LISTEN: "127.0.0.1:0", EPHEMERA_ROUTES_HTTP_LISTEN: "127.0.0.1:0", EPHEMERA_GATEWAY_LISTEN: "127.0.0.1:0", EPHEMERA_CONSOLE_LISTEN: "127.0.0.1:0", EPHEMERA_JOBS_LISTEN: "127.0.0.1:0", ...extra };
}

/** Starts one service and waits until its gRPC health says SERVING; resolves to the process and how long that took. */
export async function startService(service, env, healthAddress, timeoutMs = 60_000) {
  const t0 = performance.now();
  // EPHEMERA_BENCH_CPU_PROF=DIR: each service writes a V8 CPU profile there when it stops (where a step's CPU goes).
  const prof = process.env.EPHEMERA_BENCH_CPU_PROF ? ["--cpu-prof", `--cpu-prof-dir=${process.env.EPHEMERA_BENCH_CPU_PROF}`, `--cpu-prof-name=${service}.cpuprofile`] : [];
  const p = child(service, process.execPath, [...prof, join(ROOT, "services", service, "dist", "main.js")], env);
  try {
    await waitFor(async () => {
      if (!p.running) throw new Error(`${service} exited during start-up:\n${p.tail.join("\n")}`);
      return checkHealth(healthAddress, 500);
    }, { timeoutMs, intervalMs: 10, what: `${service} on ${healthAddress} to report SERVING` });
  } catch (err) {
    await p.stop("SIGKILL");
    throw err;
  }
  return { proc: p, ms: performance.now() - t0 };
}

/** The environment of the four services under `prefix`, each listening on a port of its own; `at(service)` is where. */
const runnerRoots = new Set();

/**
 * Where a stack's runners keep their run directories: where a runner's own default puts
 * them (a memory filesystem, when it has room), in a directory of this scratch's, removed
 * by stopAll.
 */
function runnerRoot(scratch) {
  const root = defaultWorkRoot(scratch);
  if (root === scratch) return scratch;
  const dir = join(root, `ephemera-bench-${basename(scratch)}`);
  runnerRoots.add(dir);
  return dir;
}

export async function stackEnv({ natsUrl, redisUrl, scratch, prefix, env: extra = {} }) {
  const ports = {};
  for (const s of SERVICES) ports[s] = await freePort();
  const at = (s) => `127.0.0.1:${ports[s]}`;
  const env = serviceEnv({
    NATS_URL: natsUrl, REDIS_URL: redisUrl, EPHEMERA_PREFIX: prefix,
    EPHEMERA_API_LISTEN: at("sandbox"), EPHEMERA_IOCONTEXT_LISTEN: at("iocontext"), EPHEMERA_IOCONTEXT_ADDR: at("iocontext"),
    EPHEMERA_SCHEDULER_LISTEN: at("scheduler"), EPHEMERA_RUNNER_LISTEN: at("runner"),
    EPHEMERA_RUNNER_WORKDIR: join(runnerRoot(scratch), prefix, "runner"),
    EPHEMERA_SIGNING_KEY_FILE: join(scratch, prefix, "signing.key"),
    ...extra,
  });
  return { env, at };
}

/**
 * The four services under a fresh prefix (or `prefix`) on the given servers, each listening
 * on a port of its own; `runners` runner processes for the one cluster (the second and
 * later as `runner2`, … with a port and a work directory of their own). Runner concurrency
 * stays at its default unless `env` sets it.
 */
export async function startStack({ natsUrl, redisUrl, scratch, tag, prefix = newPrefix(tag), runners = 1, env: extra = {} }) {
  const { env, at } = await stackEnv({ natsUrl, redisUrl, scratch, prefix, env: extra });
  const starts = SERVICES.map((s) => ({ name: s, service: s, env, health: at(s) }));
  for (let i = 2; i <= runners; i++) {
    const health = `127.0.0.1:${await freePort()}`;
    starts.push({ name: `runner${i}`, service: "runner", health, env: { ...env, EPHEMERA_RUNNER_LISTEN: health, EPHEMERA_RUNNER_WORKDIR: join(runnerRoot(scratch), prefix, `runner${i}`) } });
  }
  const names = starts.map((s) => s.name);
  const procs = {};
  try {
    await Promise.all(starts.map(async (s) => { procs[s.name] = (await startService(s.service, s.env, s.health)).proc; }));
  } catch (err) {
    await Promise.all(Object.values(procs).map((p) => p.stop()));
    throw err;
  }
  return {
    prefix, env, procs, api: at("sandbox"), iocontext: at("iocontext"),
    signingKey: () => readFileSync(env.EPHEMERA_SIGNING_KEY_FILE),
    /**
     * utime+stime (ms) and peak RSS (VmHWM, MB) of each service process now; a runner's CPU
     * includes its resident step launcher's (`ephemera-launch --serve`, which forks its steps).
     */
    usage: () => Object.fromEntries(names.map((s) => {
      if (!procs[s].running) throw new Error(`${s} (pid ${procs[s].pid}) is no longer running; its last lines:\n${procs[s].tail.join("\n")}`);
      const own = procUsage(procs[s].pid);
      // A launcher listed may end before it is read (its runner replaced it): counted until then only.
      const helpers = residentLaunchersOf(procs[s].pid).flatMap((pid) => { try { return [procUsage(pid)]; } catch { return []; } });
      return [s, { ...own, cpuMs: own.cpuMs + helpers.reduce((sum, h) => sum + h.cpuMs, 0) }];
    })),
    stop: () => Promise.all(names.map((s) => procs[s]?.stop())),
  };
}

/** The resident step launchers a process started (its children running `ephemera-launch --serve`). */
function residentLaunchersOf(pid) {
  const found = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const argv = readFileSync(`/proc/${d}/cmdline`, "utf8").split("\0");
      if (argv[1] !== "--serve" || !argv[0].endsWith("ephemera-launch")) continue;
      if (Number(/PPid:\s+(\d+)/.exec(readFileSync(`/proc/${d}/status`, "utf8"))?.[1]) === pid) found.push(Number(d));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/** CPU (user+system, ms, the process's own, not its children's) and peak resident set (MB) of a live process. */
export function procUsage(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name (which may hold spaces) are split from its closing parenthesis.
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const cpuMs = ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK; // utime, stime: fields 14 and 15
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const hwm = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? 0);
  const rss = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0);
  return { cpuMs, peakRssMb: hwm / 1024, rssMb: rss / 1024 };
}

/** Stops every process started here (services first, servers last). */
export async function stopAll() {
  const procs = [...live];
  const servers = procs.filter((p) => p.name.endsWith("-server"));
  await Promise.all(procs.filter((p) => !servers.includes(p)).map((p) => p.stop("SIGTERM", 5_000)));
  await Promise.all(servers.map((p) => p.stop("SIGTERM", 5_000)));
  for (const dir of runnerRoots) rmSync(dir, { recursive: true, force: true });
  runnerRoots.clear();
  // What a figure borrowed from another file started (cli-startup's API) if it was cut short.
  for (const pid of ownChildren()) {
    try { process.kill(pid, "SIGTERM"); } catch { /* gone meanwhile */ }
  }
}

/** PIDs of this process's live children. */
function ownChildren() {
  const pids = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (Number(/PPid:\s+(\d+)/.exec(readFileSync(`/proc/${d}/status`, "utf8"))?.[1]) === process.pid) pids.push(Number(d));
    } catch { /* exited while listed */ }
  }
  return pids;
}
