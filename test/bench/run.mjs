// pnpm bench: ephemera end to end, on a NATS, a Redis and four service processes of the
// bench's own. Each figure against a baseline measured in the same run (machines differ;
// ratios travel): warm-up, then samples, min and median printed, a table at the end, and
// the run appended as one JSON line to bench/results/<date>-<sha>.json. It reports; it
// never fails on a ratio. `pnpm bench --quick`: a reduced set in about a minute.
import { execFileSync } from "node:child_process";
import { appendFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { availableParallelism, totalmem } from "node:os";
import { join } from "node:path";
import { Api } from "../../services/cli/dist/api.js";
import { GOAL as IO_READ_GOAL, measureIoRead } from "./ioread.mjs";
import { redisOutageFigure } from "./redis-outage.mjs";
import { runBatch } from "./batch.mjs";
import { restartFigures } from "./restart.mjs";
import { ROOT, startServers, startStack, stopAll } from "./system.mjs";
import { chainPlugin, createAndWait, diamondPlugin, makeChain, sandbox, watchReadiness } from "./workloads.mjs";

const quick = process.argv.includes("--quick");
// --scale: only the batches and the restarts on a history (the rows of "Scale" in docs/performance.md).
const all = !process.argv.includes("--scale");
const P = quick
  ? { samples: 3, chain: 10, diamonds: 3, small: 20, large: 50, deleted: 1_000, ran: 50, restarts: 2, reads: 100, deadlineMs: 900_000 }
  : { samples: 5, chain: 30, diamonds: 5, small: 200, large: 1000, deleted: 20_000, ran: 1_000, restarts: 3, reads: 300, deadlineMs: 30 * 60_000 };
const SLEEP_S = 1.5;

const scratch = mkdtempSync("/var/tmp/ephemera-bench-");
const rows = [];
const notes = [];
let cleaning;
const cleanup = () => (cleaning ??= stopAll().finally(() => rmSync(scratch, { recursive: true, force: true })));
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    process.stderr.write(`\n${signal}: stopping the bench's servers and services\n`);
    void cleanup().finally(() => process.exit(130));
  });
}
// The whole run is bounded, whatever hangs.
const deadline = setTimeout(() => {
  process.stderr.write(`the bench did not finish within ${P.deadlineMs / 1000} s; stopping\n`);
  void cleanup().finally(() => process.exit(1));
}, P.deadlineMs);
deadline.unref();

const log = (s) => process.stderr.write(`[bench ${(performance.now() / 1000).toFixed(1)}s] ${s}\n`);
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const stats = (xs) => ({ min: Math.min(...xs), median: median(xs), n: xs.length });
/** The nearest-rank `p`th percentile (0 < p ≤ 100) of `xs`. */
const percentile = (xs, p) => [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil((p / 100) * xs.length) - 1)];

/**
 * One row of the table. `measured` and `baseline`: samples (ms) or a single value; `goal`:
 * the most the ratio (or, without a baseline, the measured median) may be; `unit` of the
 * measured values when they are not ms.
 */
function record(figure, { measured, baseline, baselineLabel, goal, unit = "ms", extra }) {
  const m = Array.isArray(measured) ? stats(measured) : { min: measured, median: measured, n: 1 };
  const b = baseline === undefined ? undefined : Array.isArray(baseline) ? stats(baseline) : { min: baseline, median: baseline, n: 1 };
  const ratio = b ? m.median / b.median : undefined;
  const judged = ratio ?? m.median;
  const row = { figure, baselineLabel, baseline: b, measured: m, unit, ratio, ratioMin: b ? m.min / b.min : undefined, goal, met: goal === undefined ? undefined : judged <= goal, ...extra };
  rows.push(row);
  log(`${figure}: ${fmt(m, unit)}${b ? ` vs ${fmt(b, unit)} → ${ratio.toFixed(2)}×` : ""}`);
  return row;
}
const num = (x, unit) => (unit === "ms" ? (x >= 10_000 ? `${(x / 1000).toFixed(1)} s` : `${x.toFixed(x < 10 ? 2 : 0)} ms`) : `${x.toFixed(1)} ${unit}`);
const fmt = (s, unit) => (s.n === 1 ? num(s.median, unit) : `${num(s.min, unit)} / ${num(s.median, unit)}`);

async function chainFigures(stack, api, watch) {
  const n = P.chain;
  await api.applyPlugin(chainPlugin(n));
  await api.applyPlugin(chainPlugin(1));
  const makeRun = makeChain(join(scratch, "make"), n);
  const tn = [];
  const t1 = [];
  const make = [];
  for (let i = 0; i <= P.samples; i++) {
    const [long] = await createAndWait(api, watch, sandbox(`chain${n}-${i}`, `chain${n}`), 120_000);
    const [short] = await createAndWait(api, watch, sandbox(`chain1-${i}`, "chain1"), 30_000);
    const m = makeRun();
    if (i === 0) continue; // warm-up
    tn.push(long);
    t1.push(short);
    make.push(m);
  }
  record(`chain of ${n} steps, create → ready`, { measured: tn, baseline: make, baselineLabel: `make, same chain`, goal: 5 });
  const perStep = tn.map((t, i) => (t - t1[i]) / (n - 1));
  record(`overhead per step (T${n} − T1)/${n - 1}`, { measured: perStep, goal: 10, extra: { t1: stats(t1) } });
  return `chain${n}-1`;
}

async function diamondFigure(api, watch) {
  await api.applyPlugin(diamondPlugin(SLEEP_S));
  const times = [];
  for (let i = 0; i <= P.diamonds; i++) {
    const [t] = await createAndWait(api, watch, sandbox(`diamond-${i}`, "diamond"), 60_000);
    if (i > 0) times.push(t);
  }
  record(`diamond create → ready (2 × sleep ${SLEEP_S} in parallel)`, { measured: times, baseline: SLEEP_S * 1000, baselineLabel: `ideal ${SLEEP_S} s`, goal: 1.2 });
}

/** A step's inputs from the IO context against an empty unary call on the same channel (test/bench/ioread.mjs). */
async function ioReadFigure(stack, api, sandboxName) {
  const { baseline, measured } = await measureIoRead({ stack, api, sandboxName, chain: P.chain, samples: P.samples, reads: P.reads });
  record("IO context read of a step's inputs", { measured, baseline, baselineLabel: "empty unary call (health Check), same channel", goal: IO_READ_GOAL });
}

/** A batch of `count` sandboxes on a fresh stack (test/bench/batch.mjs). */
const batch = (servers, count, runners = 1) => runBatch({ servers, scratch, count, runners });

async function main() {
  const sha = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim();
  const machine = { cores: availableParallelism(), memGiB: Math.round(totalmem() / 2 ** 30), node: process.version };
  log(`${quick ? "quick" : "full"}${all ? "" : " scale"} run at ${sha}: ${machine.cores} cores, ${machine.memGiB} GiB, node ${machine.node}; scratch ${scratch}`);
  const servers = await startServers(join(scratch, "servers"));
  log(`own NATS ${servers.natsUrl}, Redis ${servers.redisUrl}`);

  // Chain, diamond and IO context reads on one stack.
  if (all) {
    const stack = await startStack({ ...servers, scratch, tag: "steps" });
    const api = new Api(stack.api, { timeoutMs: 30_000 });
    const watch = watchReadiness(api);
    try {
      const chainSandbox = await chainFigures(stack, api, watch);
      await diamondFigure(api, watch);
      await ioReadFigure(stack, api, chainSandbox);
    } finally {
      await watch.stop();
      await stack.stop();
    }
  }

  // Steps while the IO context's Redis is stopped: a stack on a Redis of the figure's own.
  if (all) await borrowed("4-step chain with Redis stopped", async () => {
    const { up, down } = await redisOutageFigure({ ...servers, scratch, samples: P.samples });
    record("4-step chain with Redis stopped", { measured: down, baseline: up, baselineLabel: "4-step chain, Redis up", goal: 2 });
  });

  // The Kubernetes driver on the simulated cluster: its own stack and simulator.
  if (all) await borrowed("Kubernetes driver", async () => {
    const { kubeFigures } = await import("./kube.mjs");
    const k = await kubeFigures({ ...servers, scratch, chain: quick ? 5 : 10, samples: P.samples });
    record("Kubernetes: step-to-step gap (a pod's end → the next step's pod created), simulated cluster", { measured: k.gaps, goal: 100 });
    record("Kubernetes: container start (pod created → main running), simulated cluster", { measured: k.starts });
    // The pod and its token Secret, each created and deleted.
    record("Kubernetes API writes per step", { measured: k.writes, unit: "calls", goal: 4 });
    record("Kubernetes polling reads per step (GET of a pod)", { measured: k.pollingReads, unit: "calls", goal: 0 });
    notes.push(`Kubernetes API calls per step (${k.steps} steps): ${Object.entries(k.perStep).map(([c, n]) => `${c} ${n.toFixed(2)}`).join(", ")}`);
  });

  // Batches, each on a fresh stack (so peak RSS and CPU are the batch's own).
  const small = await batch(servers, P.small);
  log(`batch of ${P.small}: all ready in ${(small.totalMs / 1000).toFixed(1)} s`);
  const large = await batch(servers, P.large);
  log(`batch of ${P.large}: all ready in ${(large.totalMs / 1000).toFixed(1)} s`);
  record(`${P.large} sandboxes × 4 steps, all ready`, { measured: large.totalMs, goal: quick ? undefined : 60_000 });
  record(`${P.large} vs ${P.small} sandboxes, all ready`, { measured: large.totalMs, baseline: small.totalMs, baselineLabel: `${P.small} sandboxes`, goal: 1.1 * (P.large / P.small) });
  // Time-to-ready as fractions of the batch: a burst served fairly readies its first sandboxes early, and none late.
  record(`median time-to-ready, ${P.small} batch`, { measured: median(small.readyAfterCreate), baseline: small.totalMs, baselineLabel: "the batch's total", goal: 0.25 });
  record(`p90 time-to-ready, ${P.small} batch`, { measured: percentile(small.readyAfterCreate, 90), baseline: small.totalMs, baselineLabel: "the batch's total", goal: 0.6 });
  record(`max time-to-ready, ${P.small} batch`, { measured: Math.max(...small.readyAfterCreate), baseline: small.totalMs, baselineLabel: "the batch's total", goal: 1.1 });
  // The same from the burst's start (no goal): what admission moved before the creates' return is counted here.
  if (small.readyAfterStart) {
    record(`median time-to-ready from the burst's start, ${P.small} batch`, { measured: median(small.readyAfterStart), baseline: small.totalMs, baselineLabel: "the batch's total" });
    record(`p90 time-to-ready from the burst's start, ${P.small} batch`, { measured: percentile(small.readyAfterStart, 90), baseline: small.totalMs, baselineLabel: "the batch's total" });
  }
  for (const [service, mb] of Object.entries(large.peakRssMb)) record(`peak RSS ${service}, ${P.large} batch`, { measured: mb, unit: "MB", goal: 300 });
  const cpuTotal = Object.values(large.cpuMs).reduce((a, b) => a + b, 0);
  notes.push(`service CPU in the ${P.large} batch, ms per step: ${Object.entries(large.cpuMs).map(([s, ms]) => `${s} ${(ms / large.steps).toFixed(1)}`).join(", ")}`);
  record(`service CPU per step, ${P.large} batch`, { measured: cpuTotal / large.steps, goal: 5, extra: { cpuMsByService: large.cpuMs, steps: large.steps } });
  for (const [service, ms] of Object.entries(large.cpuMs)) record(`service CPU per step, ${service}, ${P.large} batch`, { measured: ms / large.steps });
  const perStep = (n) => (n / large.steps).toFixed(2);
  notes.push(`NATS in the ${P.large} batch, per step: ${perStep(large.nats.commits)} commits appended to the event stream, ` +
    `${perStep(large.nats.in)} messages into the server, ${perStep(large.nats.out)} out of it (every stream, consumer and request of the prefix's, the bench's watch included)`);

  // The same batch with a second runner process for the cluster.
  const twoRunners = await batch(servers, P.large, 2);
  log(`batch of ${P.large} with two runners: all ready in ${(twoRunners.totalMs / 1000).toFixed(1)} s`);
  record(`${P.large} sandboxes × 4 steps, all ready, two runner processes`, {
    measured: twoRunners.totalMs, baseline: large.totalMs, baselineLabel: "one runner process", extra: { cpuMsByService: twoRunners.cpuMs },
  });

  // Start-ups: an eph command and the agent against a bare Node.
  process.env.NATS_URL = servers.natsUrl;
  process.env.REDIS_URL = servers.redisUrl;
  // Figures of other files (test/bench/cli-startup.mjs, agent-startup.mjs): a change in
  // what they return costs their row, not the run.
  if (all) await borrowed("eph sandbox get", async () => {
    const { cliStartup } = await import("./cli-startup.mjs");
    const cli = await cliStartup({ samples: P.samples, warmup: 2 });
    record("eph sandbox get", { measured: cli.measured.samples, baseline: cli.baseline.samples, baselineLabel: "node -e 0", goal: 3 });
  });
  if (all) await borrowed("agent start-up", async () => {
    const agentBench = await import("./agent-startup.mjs").catch(() => undefined);
    if (agentBench) {
      // Its result carries more cases than this table needs: node -e 0 ("baseline") and the agent as it starts in a pod ("agent").
      const r = agentBench.measureAgentStartup({ samples: P.samples, warmup: 2 });
      const pair = (s) => ({ min: s.minMs, median: s.medianMs, n: r.samples });
      const [baseline, measured] = [pair(r.baseline), pair(r.agent)];
      const goal = r.goal ?? 1.5;
      rows.push({
        figure: "agent start-up", baselineLabel: "node -e 0", unit: "ms", baseline, measured,
        ratio: measured.median / baseline.median, ratioMin: measured.min / baseline.min, goal, met: measured.median / baseline.median <= goal,
      });
      log(`agent start-up: ${fmt(measured, "ms")} vs ${fmt(baseline, "ms")}`);
    } else {
      notes.push("agent start-up not measured: test/bench/agent-startup.mjs is not in this checkout");
    }
  });

  // The routing sidecar in front of a baseline app: latency it adds, and load on one core.
  if (all) await borrowed("ephemera-router", async () => {
    const { routerFigures } = await import("./router.mjs");
    const r = await routerFigures({ samples: P.samples, requests: quick ? 1000 : 2000 });
    record("router: p50 added to a baseline HTTP/1.1 request (through it − direct)", {
      measured: r.addedP50Ms, goal: r.goals.addedP50Ms, extra: { directP50Ms: stats(r.directP50Ms), routedP50Ms: stats(r.routedP50Ms) },
    });
    // A Node process runs on one core: 1000 requests/s on it is at most 1 ms of its CPU per request.
    record("router: CPU per request under load (≤ 1 ms: ≥ 1000 requests/s on one core)", {
      measured: r.routerCpuMsPerRequest, goal: 1000 / r.goals.requestsPerSecond,
      extra: { requestsPerSecond: r.requestsPerSecond, routerCpuShare: r.routerCpuShare, connections: r.connections },
    });
    notes.push(`router: p50 direct ${median(r.directP50Ms).toFixed(3)} ms, through it ${median(r.routedP50Ms).toFixed(3)} ms; ` +
      `${r.connections} connections through it: ${r.requestsPerSecond.toFixed(0)} requests/s with ${(r.routerCpuShare * 100).toFixed(0)} % of a core ` +
      `(${(1000 / r.routerCpuMsPerRequest).toFixed(0)} requests/s per core); peak RSS ${r.peakRssMb.toFixed(0)} MB`);
  });

  // The tunnel between a workstation and the cluster, on loopback, in this process.
  if (all) await borrowed("tunnel", async () => {
    const { tunnelFigures } = await import("./tunnel.mjs");
    const t = await tunnelFigures({ natsUrl: servers.natsUrl, samples: P.samples, requests: quick ? 200 : 1000, largeSamples: quick ? 2 : P.samples });
    const pair = (f) => ({ directP50Ms: stats(f.direct), throughP50Ms: stats(f.through) });
    record("tunnel: p50 added to a GET on a new connection to a local workload (through it − direct)", {
      measured: t.fresh.added, goal: t.goals.addedNewConnectionMs, extra: pair(t.fresh),
    });
    record("tunnel: p50 added to a GET on a kept-alive connection (through it − direct)", {
      measured: t.kept.added, goal: t.goals.addedKeptAliveMs, extra: pair(t.kept),
    });
    const mibs = (times) => (t.largeMiB * 1000) / median(times);
    record(`tunnel: one ${t.largeMiB} MiB GET through it (≤ 2×: ≥ half the direct throughput)`, {
      measured: t.big.through, baseline: t.big.direct, baselineLabel: `the same GET direct`, goal: t.goals.largeTimeRatio,
      extra: { throughMiBs: mibs(t.big.through), directMiBs: mibs(t.big.direct) },
    });
    record("tunnel: p50 added to a dial + 4-byte round trip, workstation → cluster (TunnelClient.dial − net.connect)", {
      measured: t.dial.added, goal: t.goals.addedDialMs, extra: pair(t.dial),
    });
    notes.push(`tunnel: p50 new connection direct ${median(t.fresh.direct).toFixed(3)} ms, through ${median(t.fresh.through).toFixed(3)} ms; ` +
      `kept-alive ${median(t.kept.direct).toFixed(3)} / ${median(t.kept.through).toFixed(3)} ms; ` +
      `${t.largeMiB} MiB at ${mibs(t.big.direct).toFixed(0)} MiB/s direct, ${mibs(t.big.through).toFixed(0)} MiB/s through; ` +
      `dial ${median(t.dial.direct).toFixed(3)} / ${median(t.dial.through).toFixed(3)} ms (h2c; caller, tunnel and client share one process)`);
  });

  // Restart of each service on a realistic history.
  await borrowed("restarts on a history", async () => {
    const r = await restartFigures({ ...servers, scratch, deleted: P.deleted, ran: P.ran, samples: P.restarts, log });
    const { history } = r;
    const what = `${P.deleted / 1000}k deleted + ${P.ran} run sandboxes`;
    notes.push(`history: ${P.deleted} sandboxes of a plugin without steps created, ready and deleted in ${(history.deletedMs / 1000).toFixed(1)} s, ` +
      `${P.ran} of the four-step plugin in ${(history.ranMs / 1000).toFixed(1)} s; ${history.commits} commits (${(history.bytes / 2 ** 20).toFixed(1)} MiB) in the event stream`);
    for (const [service, f] of Object.entries(r.byService)) {
      record(`${service} restart to SERVING, ${what}`, { measured: f.full.ms, baseline: f.empty.ms, baselineLabel: "empty prefix", goal: 1.3 });
      record(`${service} RSS at SERVING, ${what}`, { measured: f.full.rssMb, baseline: f.empty.rssMb, baselineLabel: "empty prefix", unit: "MB", goal: 1.2 });
    }
    await removePrefixes(servers, r.prefixes);
  });

  notes.push(
    "runner concurrency: its default, max(2, cores); batches: one run each, 16 creates in flight",
    "ready: when the sandbox's ready event arrives on one EventService.Watch stream (follow, ephemera.sandbox.*); chain and diamond from before the create call, time-to-ready from its return",
  );
  printTable(machine, sha);
  const dir = join(ROOT, "bench", "results");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${new Date().toISOString().slice(0, 10)}-${sha}.json`);
  const params = { ...P, runnerConcurrency: "default (max(2, cores))", readiness: "EventService.Watch (follow, ephemera.sandbox.*)" };
  appendFileSync(file, `${JSON.stringify({ at: new Date().toISOString(), sha, quick, scaleOnly: !all, machine, params, rows, notes, batches: { small, large: { ...large, readyAfterCreate: stats(large.readyAfterCreate), readyAfterStart: stats(large.readyAfterStart) }, twoRunners } }, (k, v) => ((k === "readyAfterCreate" || k === "readyAfterStart") && Array.isArray(v) ? stats(v) : v))}\n`);
  log(`appended to ${file}`);
}

/** Removes what ephemera kept under each prefix (scripts/remove-prefix.mjs), so later figures run on a server that no longer holds them. */
async function removePrefixes(servers, prefixes) {
  for (const prefix of prefixes) {
    execFileSync(process.execPath, [join(ROOT, "scripts", "remove-prefix.mjs"), prefix], {
      env: { ...process.env, NATS_URL: servers.natsUrl, REDIS_URL: servers.redisUrl }, stdio: ["ignore", "ignore", "pipe"], timeout: 60_000,
    });
  }
}

async function borrowed(figure, fn) {
  try {
    await fn();
  } catch (err) {
    notes.push(`${figure}: not measured (${String(err.message ?? err).split("\n")[0]})`);
    log(`${figure} failed: ${err.stack ?? err}`);
  }
}

function printTable(machine, sha) {
  const head = ["figure", "baseline", "measured (min / median)", "ratio", "goal", "met?"];
  const lines = rows.map((r) => [
    r.figure,
    r.baseline ? `${r.baselineLabel}: ${fmt(r.baseline, r.unit)}` : "—",
    fmt(r.measured, r.unit),
    r.ratio === undefined ? "—" : `${r.ratio.toFixed(2)}×`,
    r.goal === undefined ? "report" : r.ratio === undefined ? `≤ ${r.unit === "ms" && r.goal >= 1000 ? `${r.goal / 1000} s` : `${r.goal} ${r.unit}`}` : `≤ ${r.goal}×`,
    r.met === undefined ? "—" : r.met ? "yes" : "NO",
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
  const line = (cells) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(" | ")} |`;
  console.log(`\nephemera bench (${quick ? "quick" : "full"}${all ? "" : ", scale rows only"}) at ${sha}: ${machine.cores} cores, ${machine.memGiB} GiB, node ${machine.node}`);
  console.log(line(head));
  console.log(`|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`);
  for (const l of lines) console.log(line(l));
  for (const n of notes) console.log(`note: ${n}`);
}

try {
  await main();
} catch (err) {
  process.stderr.write(`bench failed: ${err.stack ?? err}\n`);
  process.exitCode = 1;
} finally {
  await cleanup();
  clearTimeout(deadline);
}
