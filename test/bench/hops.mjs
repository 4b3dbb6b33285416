// Where a chained step's time goes, from the events' own timestamps: a chain of N steps
// on a fresh stack (own NATS, Redis and services), then, per step, dispatched → started
// (outbox, work queue, the runner's checks), started → succeeded (the runner: inputs,
// launch, outputs, log, journal) and succeeded → the next step dispatched (the scheduler).
//   node test/bench/hops.mjs [N]
import { mkdtempSync, rmSync } from "node:fs";
import { Api } from "../../services/cli/dist/api.js";
import { Aggregates, decode } from "../../services/events/dist/index.js";
import { JetStreamEventStore, connectNats } from "../../services/eventstore/dist/index.js";
import { waitFor } from "../../services/kit/dist/client.js";
import { startServers, startStack, stopAll } from "./system.mjs";
import { chainPlugin, sandbox, watchReadiness } from "./workloads.mjs";

const n = Number(process.argv[2] ?? 10);
const scratch = mkdtempSync("/var/tmp/ephemera-bench-hops-");
try {
  const servers = await startServers(`${scratch}/servers`);
  const stack = await startStack({ natsUrl: servers.natsUrl, redisUrl: servers.redisUrl, scratch, tag: "hops" });
  const api = new Api(stack.api, { timeoutMs: 30_000 });
  const watch = watchReadiness(api);
  await api.applyPlugin(chainPlugin(n));
  const sb = sandbox("hops", `chain${n}`);
  await api.applySandbox(sb);
  await watch.ready(sb.name, 60_000);
  const view = await api.getSandbox(sb.name);
  const rk = view.routingKey;
  const nc = await connectNats(servers.natsUrl, "hops");
  const store = await JetStreamEventStore.open(nc, { prefix: stack.prefix });
  const wf = `${rk}.r.create`;
  const at = (e) => Date.parse(e.time);
  const wfEvents = (await store.read(Aggregates.workflow, wf)).events;
  const dispatched = new Map(wfEvents.filter((e) => e.type.endsWith("step_dispatched.v1")).map((e) => [decode(e).data.step, at(e)]));
  const rows = [];
  for (let i = 1; i <= n; i++) {
    const run = (await store.read(Aggregates.steprun, `${wf}.s${i}.1`)).events;
    const started = at(run.find((e) => e.type.endsWith("started.v1")));
    const done = at(run.find((e) => e.type.endsWith("succeeded.v1")));
    const next = i < n ? dispatched.get(`s${i + 1}`) : undefined;
    rows.push({ step: i, toStart: started - dispatched.get(`s${i}`), run: done - started, toNext: next === undefined ? undefined : next - done });
  }
  const of = (k) => rows.map((r) => r[k]).filter((x) => x !== undefined).slice(1);
  const mean = (k) => { const v = of(k); return (v.reduce((a, b) => a + b, 0) / v.length).toFixed(1); };
  const median = (k) => { const v = of(k).sort((a, b) => a - b); return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2; };
  console.table(rows);
  console.log(`mean (steps 2..): dispatched→started ${mean("toStart")} ms, started→succeeded ${mean("run")} ms, succeeded→next dispatched ${mean("toNext")} ms`);
  // The events' times are whole milliseconds, and one slow step moves a mean: the medians are the figures to compare.
  console.log(`median (steps 2..): dispatched→started ${median("toStart")} ms, started→succeeded ${median("run")} ms, succeeded→next dispatched ${median("toNext")} ms`);
  watch.close?.();
  await nc.close();
  await waitFor(() => true);
} finally {
  await stopAll();
  rmSync(scratch, { recursive: true, force: true });
}
