// eph start-up: `eph sandbox get NAME` as a process, as a user runs it, against a real API
// (the built sandbox service on this machine's NATS and Redis, under a fresh prefix, holding
// one sandbox), as a ratio to `node -e 0` in the same run. What is measured is module
// loading plus the command's own work: one Get over a new connection, the view printed as YAML.
// Goal: ratio ≤ 3. Run alone with `node test/bench/cli-startup.mjs` (after `pnpm build`), or
// call `cliStartup()` from another bench.
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { jetstreamManager } from "@nats-io/jetstream";
import { Redis } from "ioredis";
import { connectNats } from "../../services/eventstore/dist/index.js";
import { checkHealth, waitFor } from "../../services/kit/dist/client.js";
import { freePort } from "./system.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
/** The `eph` entry measured: EPH_MAIN to compare another build (e.g. an earlier commit's). */
const EPH = process.env.EPH_MAIN ?? join(ROOT, "services/cli/dist/bundle/main.js");
const NATS_URL = process.env.NATS_URL ?? "nats://127.0.0.1:4222";
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const SANDBOX = "startup";

/** This process's environment without the caller's EPHEMERA_* (a token or TLS of their own would change what is measured). */
function cleanEnv(extra) {
  return { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("EPHEMERA_"))), ...extra };
}

/** Wall time of one process run to its exit, in ms; it must succeed, or the sample measures something else. */
function timed(args, env, input) {
  const t = process.hrtime.bigint();
  const r = spawnSync(process.execPath, args, { env, input, encoding: "utf8" });
  const ms = Number(process.hrtime.bigint() - t) / 1e6;
  if (r.status !== 0) throw new Error(`node ${args.join(" ")} exited ${r.status}: ${r.stderr}`);
  return ms;
}

function stats(samples) {
  const s = [...samples].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return { min: s[0], median: s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2, samples };
}

/** The sandbox service (the public API) alone: `sandbox get` needs nothing else. */
async function startApi(prefix) {
  const api = `127.0.0.1:${await freePort()}`;
  const env = cleanEnv({ NATS_URL, REDIS_URL, EPHEMERA_PREFIX: prefix, EPHEMERA_API_LISTEN: api, EPHEMERA_METRICS_LISTEN: "127.0.0.1:0", EPHEMERA_ROUTES_LISTEN: "127.0.0.1:0", EPHEMERA_ROUTES_HTTP_LISTEN: "127.0.0.1:0", EPHEMERA_GATEWAY_LISTEN: "127.0.0.1:0", EPHEMERA_CONSOLE_LISTEN: "127.0.0.1:0", EPHEMERA_JOBS_LISTEN: "127.0.0.1:0", LOG_LEVEL: "warn" });
  const child = spawn(process.execPath, [join(ROOT, "services/sandbox/dist/main.js")], { env, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d) => { stderr += d; });
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  };
  try {
    await waitFor(async () => {
      if (child.exitCode !== null) throw new Error(`the sandbox service exited during start-up: ${stderr}`);
      return checkHealth(api, 500);
    }, { timeoutMs: 30_000, intervalMs: 100, what: `the sandbox service on ${api} to report SERVING` });
  } catch (err) {
    await stop();
    throw err;
  }
  return { api, stop };
}

async function removePrefix(prefix) {
  const nc = await connectNats(NATS_URL, "bench-cleanup");
  try {
    const jsm = await jetstreamManager(nc);
    for await (const s of jsm.streams.list()) if (s.config.name.includes(prefix)) await jsm.streams.delete(s.config.name);
  } finally {
    await nc.close();
  }
  const redis = new Redis(REDIS_URL);
  try {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length) await redis.del(...keys);
  } finally {
    redis.disconnect();
  }
}

/**
 * Times `node -e 0` and `eph sandbox get` alternately (so load on a shared machine falls on
 * both alike), after `warmup` unrecorded runs of each. Returns min and median of each and
 * the ratios of the medians and of the minimums.
 */
export async function cliStartup({ samples = 7, warmup = 2 } = {}) {
  const prefix = `bench${randomBytes(4).toString("hex")}`;
  const server = await startApi(prefix);
  try {
    const env = cleanEnv({ EPHEMERA_API: server.api });
    // A sandbox without resources: Get returns a real view, and nothing runs in the background.
    timed([EPH, "sandbox", "apply", "-f", "-", "--wait=false"], env, `name: ${SANDBOX}\nspec:\n  cluster: local\n`);
    const baselineArgs = ["-e", "0"];
    const measuredArgs = [EPH, "sandbox", "get", SANDBOX];
    for (let i = 0; i < warmup; i++) {
      timed(baselineArgs, env);
      timed(measuredArgs, env);
    }
    const base = [];
    const measured = [];
    for (let i = 0; i < samples; i++) {
      base.push(timed(baselineArgs, env));
      measured.push(timed(measuredArgs, env));
    }
    const baseline = stats(base);
    const eph = stats(measured);
    return {
      bench: "eph sandbox get (vs node -e 0)",
      n: samples,
      baseline,
      measured: eph,
      ratioMedian: eph.median / baseline.median,
      ratioMin: eph.min / baseline.min,
    };
  } finally {
    await server.stop();
    await removePrefix(prefix);
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const samples = Number(process.env.SAMPLES ?? 9);
  const r = await cliStartup({ samples });
  const f = (ms) => `${ms.toFixed(0)} ms`;
  console.log(`node -e 0:          min ${f(r.baseline.min)}, median ${f(r.baseline.median)} (n=${r.n})`);
  console.log(`eph sandbox get:    min ${f(r.measured.min)}, median ${f(r.measured.median)} (n=${r.n})`);
  console.log(`ratio: ${r.ratioMedian.toFixed(2)} (medians), ${r.ratioMin.toFixed(2)} (minimums); goal ≤ 3`);
}
