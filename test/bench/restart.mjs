// Restart of each service on a prefix with a realistic history (test/bench/history.mjs):
// a fresh process of one service alone, from its start to gRPC health SERVING, and its
// resident memory then, against the same service on a prefix that never held a sandbox.
// Both prefixes had the whole stack run on them first, so streams, buckets and durables
// exist on each and only the history differs.
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { makeHistory } from "./history.mjs";
import { SERVICES, newPrefix, procUsage, stackEnv, startServers, startService, startStack, stopAll } from "./system.mjs";

/** One start of `service` alone on `prefix`: ms to SERVING and VmRSS (MB) at that moment. */
async function startOnce({ natsUrl, redisUrl, scratch, prefix, service }) {
  const { env, at } = await stackEnv({ natsUrl, redisUrl, scratch, prefix });
  const { proc, ms } = await startService(service, env, at(service), 120_000);
  try {
    return { ms, rssMb: procUsage(proc.pid).rssMb };
  } finally {
    await proc.stop();
  }
}

/**
 * The history made, then for each service `samples` starts on each prefix (after a
 * warm-up on each), the empty and the full prefix alternated so load from elsewhere on the
 * machine falls on both alike. Resolves to { [service]: { empty, full } } of samples
 * ({ ms[], rssMb[] }), and the history's making.
 */
export async function restartFigures({ natsUrl, redisUrl, scratch, deleted, ran, samples, services = SERVICES, log = () => {} }) {
  const history = await makeHistory({ natsUrl, redisUrl, scratch, deleted, ran, log });
  const empty = newPrefix("empty");
  await (await startStack({ natsUrl, redisUrl, scratch, prefix: empty })).stop();
  const byService = {};
  for (const service of services) {
    const figure = { empty: { ms: [], rssMb: [] }, full: { ms: [], rssMb: [] } };
    for (let i = 0; i <= samples; i++) {
      for (const [which, prefix] of [["empty", empty], ["full", history.prefix]]) {
        const s = await startOnce({ natsUrl, redisUrl, scratch, prefix, service });
        if (i === 0) continue; // warm-up: the file cache, and what a first start after the stack's stop still does
        figure[which].ms.push(s.ms);
        figure[which].rssMb.push(s.rssMb);
      }
    }
    log(`restart of ${service}: ${figure.full.ms.map((x) => x.toFixed(0)).join(", ")} ms on the history, ${figure.empty.ms.map((x) => x.toFixed(0)).join(", ")} ms empty`);
    byService[service] = figure;
  }
  return { history, byService, prefixes: [empty, history.prefix] };
}

// Alone, on servers of its own: node test/bench/restart.mjs [--deleted N] [--ran N] [--samples N] [--service NAME]
if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const arg = (name, fallback) => {
    const at = process.argv.indexOf(`--${name}`);
    return at > 0 ? Number(process.argv[at + 1]) : fallback;
  };
  const scratch = mkdtempSync("/var/tmp/ephemera-bench-");
  const log = (s) => process.stderr.write(`[restart ${(performance.now() / 1000).toFixed(1)}s] ${s}\n`);
  const range = (xs) => `${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)}`;
  try {
    const servers = await startServers(join(scratch, "servers"));
    const only = process.argv.indexOf("--service");
    const services = only > 0 ? [process.argv[only + 1]] : SERVICES;
    const r = await restartFigures({ ...servers, scratch, deleted: arg("deleted", 20_000), ran: arg("ran", 1_000), samples: arg("samples", 3), services, log });
    const h = r.history;
    console.log(`history: ${h.commits} commits, ${(h.bytes / 2 ** 20).toFixed(1)} MiB; made in ${(h.deletedMs / 1000).toFixed(1)} s + ${(h.ranMs / 1000).toFixed(1)} s`);
    for (const [service, f] of Object.entries(r.byService)) {
      console.log(`${service}: start ${range(f.full.ms)} ms on the history, ${range(f.empty.ms)} ms empty; RSS ${range(f.full.rssMb)} MB against ${range(f.empty.rssMb)} MB`);
      console.log(`  RSS each start: history ${f.full.rssMb.map((x) => x.toFixed(0)).join(", ")} MB; empty ${f.empty.rssMb.map((x) => x.toFixed(0)).join(", ")} MB`);
    }
    console.log(JSON.stringify(r));
  } finally {
    await stopAll();
    rmSync(scratch, { recursive: true, force: true });
  }
}
