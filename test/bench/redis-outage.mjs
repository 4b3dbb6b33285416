// A 4-step chain with the IO context's Redis stopped, against the same chain with it up,
// on a stack whose Redis is the figure's own (the bench's other figures keep theirs).
// Redis is a cache of the output journal: its outage should cost steps next to nothing.
// Alone: `pnpm build && node test/bench/redis-outage.mjs [--samples N]`.
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { Api } from "../../services/cli/dist/api.js";
import { startRedis, startServers, startStack, stopAll } from "./system.mjs";
import { chainPlugin, createAndWait, sandbox, watchReadiness } from "./workloads.mjs";

const CHAIN = 4;

/** create → ready of a 4-step chain, `samples` times after a warm-up, with Redis up and then with it stopped. */
export async function redisOutageFigure({ natsUrl, scratch, samples }) {
  const { redis, redisUrl } = await startRedis(join(scratch, "outage-redis"));
  const stack = await startStack({ natsUrl, redisUrl, scratch, tag: "outage" });
  const api = new Api(stack.api, { timeoutMs: 30_000 });
  const watch = watchReadiness(api);
  const chains = async (label) => {
    const times = [];
    for (let i = 0; i <= samples; i++) {
      const [t] = await createAndWait(api, watch, sandbox(`${label}-${i}`, `chain${CHAIN}`), 120_000);
      if (i > 0) times.push(t); // the first of each: a warm-up (and, stopped, the moment Redis went)
    }
    return times;
  };
  try {
    await api.applyPlugin(chainPlugin(CHAIN));
    const up = await chains("redis-up");
    await redis.stop("SIGKILL");
    const down = await chains("redis-down");
    return { up, down };
  } finally {
    await watch.stop();
    await stack.stop();
    await redis.stop();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const at = process.argv.indexOf("--samples");
  const samples = at > 0 ? Number(process.argv[at + 1]) : 5;
  const scratch = mkdtempSync("/var/tmp/ephemera-bench-");
  const median = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    const m = Math.floor(s.length / 2);
    return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
  };
  try {
    const servers = await startServers(join(scratch, "servers"));
    const { up, down } = await redisOutageFigure({ ...servers, scratch, samples });
    const ms = (xs) => `min ${Math.min(...xs).toFixed(0)} ms, median ${median(xs).toFixed(0)} ms (${xs.map((x) => x.toFixed(0)).join(", ")})`;
    console.log(`4-step chain, Redis up:      ${ms(up)}`);
    console.log(`4-step chain, Redis stopped: ${ms(down)}`);
    console.log(`ratio of medians: ${(median(down) / median(up)).toFixed(2)}×`);
  } finally {
    await stopAll();
    rmSync(scratch, { recursive: true, force: true });
  }
}
