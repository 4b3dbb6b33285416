// Start-up of ephemera-agent, which starts in every step's pod twice (init, sidecar):
// `node services/io-agent/dist/agent.cjs init --check` (loads every module the agent loads
// and reads its configuration, calls nothing) against `node -e 0`, the floor of any Node
// program. Runs alternated, after a warm-up; min and median of each, and their ratios
// (goal: a median ratio of at most 1.5). A ratio, not a time: machines differ. Where the time goes:
//   builtins  node -e "require(...)" of the Node modules grpc-js loads (http2, tls, net, dns, zlib)
//   no cache  node agent-bundle.cjs init --check: the same bundle compiled without V8's code cache
//   node test/bench/agent-startup.mjs [samples]     (after pnpm build, or pnpm bundle:agent)
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const dist = join(root, "services", "io-agent", "dist");
export const AGENT = join(dist, "agent.cjs");
export const GOAL = 1.5;

const ENV = {
  PATH: process.env.PATH,
  EPHEMERA_RUN_ID: "rk0001.db.create.provision.1",
  EPHEMERA_TOKEN: "not-a-real-token",
  EPHEMERA_IOCONTEXT: "127.0.0.1:7401",
};

const CASES = {
  baseline: ["-e", "0"],
  builtins: ["-e", "for (const m of ['http2', 'tls', 'net', 'dns', 'zlib']) require(m)"],
  noCache: [join(dist, "agent-bundle.cjs"), "init", "--check"],
  agent: [AGENT, "init", "--check"],
};

function timeRun(args) {
  const t = process.hrtime.bigint();
  const r = spawnSync(process.execPath, args, { env: ENV, stdio: ["ignore", "ignore", "pipe"] });
  const ms = Number(process.hrtime.bigint() - t) / 1e6;
  if (r.status !== 0) throw new Error(`node ${args.join(" ")} exited ${r.status}: ${r.stderr}`);
  return ms;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** `samples` runs of each case (alternated, so load on the machine falls on all alike) after `warmup` of each. */
export function measureAgentStartup({ samples = 10, warmup = 3 } = {}) {
  if (!existsSync(AGENT)) throw new Error(`${AGENT} is missing: run pnpm build (or pnpm bundle:agent)`);
  const times = Object.fromEntries(Object.keys(CASES).map((k) => [k, []]));
  for (let i = 0; i < warmup; i++) for (const args of Object.values(CASES)) timeRun(args);
  for (let i = 0; i < samples; i++) for (const [k, args] of Object.entries(CASES)) times[k].push(timeRun(args));
  const stats = Object.fromEntries(Object.entries(times).map(([k, xs]) => [k, { minMs: Math.min(...xs), medianMs: median(xs) }]));
  const ratio = (k) => ({ median: stats[k].medianMs / stats.baseline.medianMs, min: stats[k].minMs / stats.baseline.minMs });
  return { samples, ...stats, ratio: ratio("agent"), ratioNoCache: ratio("noCache"), ratioBuiltins: ratio("builtins"), goal: GOAL };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const r = measureAgentStartup({ samples: Number(process.argv[2] ?? 10) });
  const line = (label, s, ratio) =>
    `  ${label.padEnd(46)} min ${s.minMs.toFixed(1).padStart(6)} ms  median ${s.medianMs.toFixed(1).padStart(6)} ms` +
    `${ratio ? `  ratio min ${ratio.min.toFixed(2)}× median ${ratio.median.toFixed(2)}×` : ""}\n`;
  process.stdout.write(
    `agent start-up, ${r.samples} samples each (node ${process.version}); ratios to node -e 0:\n` +
    line("node -e 0", r.baseline) +
    line("node -e require(http2, tls, net, dns, zlib)", r.builtins, r.ratioBuiltins) +
    line("node agent-bundle.cjs init --check (no cache)", r.noCache, r.ratioNoCache) +
    line("node agent.cjs init --check", r.agent, r.ratio) +
    `  goal ≤ ${GOAL}× (median): ${r.ratio.median <= GOAL ? "met" : "missed"}\n`,
  );
}
