// pnpm bench: speed of ephemera's hot paths, each as a ratio against a baseline run in
// the same process (never absolute goals: machines differ, ratios travel).
//   1. append: JetStreamEventStore.append (envelope, expected subject sequence, msg id)
//      against a raw JetStream publish of the same bytes.
//   2. workflow: a 1→20→1 fan-out/fan-in workflow scheduled to completion on JetStream
//      against the same scheduler on the in-memory store (the cost of persistence).
import { randomBytes } from "node:crypto";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import * as pb from "../../services/proto/dist/index.js";
import { Aggregates, encode, ev } from "../../services/events/dist/index.js";
import {
  InMemoryEventStore, InMemoryWorkQueue, JetStreamEventStore, NO_AGGREGATE, connectNats,
} from "../../services/eventstore/dist/index.js";
import { createLogger } from "../../services/kit/dist/index.js";
import { Scheduler } from "../../services/scheduler/dist/index.js";

const NATS_URL = process.env.NATS_URL ?? "nats://127.0.0.1:4222";
const prefix = `bench${randomBytes(4).toString("hex")}`;
const nc = await connectNats(NATS_URL, "bench");
const results = [];

async function time(fn) {
  const t = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t) / 1e6;
}

// ---- 1. append overhead ----
{
  const N = 2000;
  const store = await JetStreamEventStore.open(nc, { prefix });
  const js = jetstream(nc);
  const payload = JSON.stringify([{ type: "ephemera.bench.v1", data: { i: 0, pad: "x".repeat(200) } }]);
  const baseline = await time(async () => {
    for (let i = 0; i < N; i++) await js.publish(`${prefix}.ev.raw.${i % 50}`, payload);
  });
  const revisions = new Map();
  const measured = await time(async () => {
    for (let i = 0; i < N; i++) {
      const id = `a${i % 50}`;
      const r = await store.append("bench", id, revisions.get(id) ?? NO_AGGREGATE,
        [{ type: "ephemera.bench.v1", data: { i, pad: "x".repeat(200) } }], { source: "bench" });
      revisions.set(id, r);
    }
  });
  results.push({ bench: "append (vs raw publish)", n: N, baselineMs: baseline, measuredMs: measured });
}

// ---- 2. workflow to completion ----
async function workflowRun(store) {
  const queue = new InMemoryWorkQueue();
  const width = 20;
  const spec = pb.ResourcePluginSpec.fromPartial({
    runner: { image: "x" },
    create: [
      { name: "root", outputs: [{ name: "o", valueFromPath: "/tmp/o" }] },
      ...Array.from({ length: width }, (_, i) => ({ name: `w${i}`, inputs: [{ name: "o", valueFromStep: { name: "root", output: "o" } }], outputs: [{ name: "o", valueFromPath: "/tmp/o" }] })),
      { name: "join", inputs: Array.from({ length: width }, (_, i) => ({ name: `i${i}`, valueFromStep: { name: `w${i}`, output: "o" } })) },
    ],
  });
  await store.append(Aggregates.plugin, "p", NO_AGGREGATE, [encode(ev("ephemera.plugin.published.v1", { name: "p", version: "1.0.0", spec, digest: "d" }))], { source: "bench" });
  const scheduler = new Scheduler({ store, queue, logger: createLogger("bench", "silent") });
  await scheduler.start();
  // A runner that answers at once: what is measured is scheduling and persistence.
  const consumer = queue.consume("c", { concurrency: 64 }, async ({ data: d }) => {
    await store.append(Aggregates.steprun, d.runId, NO_AGGREGATE, [encode(ev("ephemera.steprun.succeeded.v1", {
      runId: d.runId, workflowId: d.workflowId, step: d.step, outputs: d.step === "join" ? [] : [{ name: "o", value: Buffer.from("v") }],
    }))], { source: "bench" });
  });
  const resource = { name: "r", plugin: "p", version: "1.0.0", params: {} };
  const ms = await time(async () => {
    await store.append(Aggregates.sandbox, "sb", NO_AGGREGATE, [
      encode(ev("ephemera.sandbox.created.v1", { name: "sb", routingKey: "rk", spec: { cluster: "c" }, resources: [resource] })),
      encode(ev("ephemera.sandbox.resource_provision_requested.v1", { sandbox: "sb", routingKey: "rk", cluster: "c", resource })),
    ], { source: "bench" });
    for (;;) {
      const wf = scheduler.workflows.get("rk.r.create")?.state;
      if (wf?.status === "succeeded") break;
      await new Promise((r) => setTimeout(r, 2));
    }
  });
  await consumer.stop();
  await scheduler.stop();
  return ms;
}
{
  const baseline = await workflowRun(new InMemoryEventStore());
  const measured = await workflowRun(await JetStreamEventStore.open(nc, { prefix: `${prefix}wf` }));
  results.push({ bench: "workflow 1→20→1 (JetStream vs in-memory store)", n: 22, baselineMs: baseline, measuredMs: measured });
}

const jsm = await jetstreamManager(nc);
for await (const s of jsm.streams.list()) if (s.config.name.startsWith(prefix)) await jsm.streams.delete(s.config.name);
await nc.close();

for (const r of results) {
  console.log(`${r.bench}: n=${r.n} baseline ${r.baselineMs.toFixed(1)} ms, measured ${r.measuredMs.toFixed(1)} ms, ratio ${(r.measuredMs / r.baselineMs).toFixed(2)}`);
}
