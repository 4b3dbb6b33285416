// A burst: `count` sandboxes of the four-step plugin created at once on a fresh stack (own
// services on the given NATS and Redis), every figure it gives: the batch's total, each
// sandbox's time-to-ready after its create returned, each service's CPU and peak RSS (a
// runner's with its resident step launcher), the commits and NATS messages. `pnpm bench`
// takes its batch rows from here; alone, on servers of its own:
//   node test/bench/batch.mjs [count] [runners] [admission waiting]     (after pnpm build)
import { mkdtempSync, rmSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Api } from "../../services/cli/dist/api.js";
import { eventStreamState } from "./history.mjs";
import { natsMessages, startServers, startStack, stopAll } from "./system.mjs";
import { fourStepPlugin, sandbox, watchReadiness } from "./workloads.mjs";

/**
 * `count` sandboxes of the four-step plugin created at once (16 creates in flight) on a
 * fresh stack with `runners` runner processes; every figure the batch gives, with the
 * commits it appended and the messages the (bench's own) NATS server took in and sent.
 */
export async function runBatch({ servers, scratch, count, runners = 1, env = {} }) {
  const stack = await startStack({ ...servers, scratch, tag: `b${count}r${runners}`, runners, env });
  const api = new Api(stack.api, { timeoutMs: 30_000 });
  const watch = watchReadiness(api);
  try {
    await api.applyPlugin(fourStepPlugin());
    // Commits in the prefix's event stream, messages into and out of the server.
    const natsCounts = async () => ({ commits: (await eventStreamState(servers.natsUrl, stack.prefix)).messages, ...(await natsMessages(servers.natsMonitorUrl)) });
    const natsBefore = await natsCounts();
    const before = stack.usage();
    const t0 = performance.now();
    const names = Array.from({ length: count }, (_, i) => `b${count}-${i}`);
    const readyAfterCreate = [];
    // From the burst's start as well: admission at the API moves a create's wait before it returns, so the time
    // after the return alone would not show what the burst cost each sandbox.
    const readyAfterStart = [];
    const createMs = [];
    const timeoutMs = Math.max(60_000, count * 600);
    let next = 0;
    await Promise.all(Array.from({ length: 16 }, async () => {
      const waits = [];
      while (next < names.length) {
        const name = names[next++];
        const asked = performance.now();
        await api.applySandbox(sandbox(name, "fourstep"));
        const created = performance.now();
        createMs.push(created - asked);
        waits.push(watch.ready(name, timeoutMs).then((at) => { readyAfterCreate.push(at - created); readyAfterStart.push(at - t0); }));
      }
      await Promise.all(waits);
    }));
    const totalMs = performance.now() - t0;
    const after = stack.usage();
    const natsAfter = await natsCounts();
    const cpuMs = Object.fromEntries(Object.keys(after).map((s) => [s, after[s].cpuMs - before[s].cpuMs]));
    const peakRssMb = Object.fromEntries(Object.keys(after).map((s) => [s, after[s].peakRssMb]));
    const nats = Object.fromEntries(Object.keys(natsAfter).map((k) => [k, natsAfter[k] - natsBefore[k]]));
    return { count, runners, steps: count * 4, totalMs, readyAfterCreate, readyAfterStart, createMs, cpuMs, peakRssMb, nats };
  } finally {
    await watch.stop();
    await stack.stop();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const count = Number(process.argv[2] ?? 200);
  const runners = Number(process.argv[3] ?? 1);
  // A third argument sets the API's EPHEMERA_ADMISSION_WAITING (0: no create is held); default: the service's.
  const env = process.argv[4] === undefined ? {} : { EPHEMERA_ADMISSION_WAITING: process.argv[4] };
  const scratch = mkdtempSync("/var/tmp/ephemera-bench-batch-");
  try {
    const servers = await startServers(`${scratch}/servers`);
    const b = await runBatch({ servers, scratch, count, runners, env });
    const perStep = Object.entries(b.cpuMs).map(([s, ms]) => `${s} ${(ms / b.steps).toFixed(1)}`).join(", ");
    const total = Object.values(b.cpuMs).reduce((a, x) => a + x, 0) / b.steps;
    process.stdout.write(`${count} sandboxes × 4 steps, ${runners} runner(s): all ready in ${(b.totalMs / 1000).toFixed(1)} s; ` +
      `service CPU per step ${total.toFixed(1)} ms (${perStep})\n`);
    const q = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] / b.totalMs;
    process.stdout.write(`time-to-ready as fractions of the batch, after the create returned: p50 ${q(b.readyAfterCreate, 50).toFixed(2)}, ` +
      `p90 ${q(b.readyAfterCreate, 90).toFixed(2)}, max ${q(b.readyAfterCreate, 100).toFixed(2)}; after the burst began: ` +
      `p50 ${q(b.readyAfterStart, 50).toFixed(2)}, p90 ${q(b.readyAfterStart, 90).toFixed(2)}, max ${q(b.readyAfterStart, 100).toFixed(2)}; ` +
      `a create's call: p50 ${(q(b.createMs, 50) * b.totalMs).toFixed(0)} ms, max ${(q(b.createMs, 100) * b.totalMs).toFixed(0)} ms\n`);
    // Counts, not times: what a change to the step's path adds or saves shows here whatever the machine's speed.
    process.stdout.write(`per step: ${Object.entries(b.nats).map(([k, n]) => `${k} ${(n / b.steps).toFixed(1)}`).join(", ")}\n`);
  } finally {
    await stopAll();
    rmSync(scratch, { recursive: true, force: true });
  }
}
