// A deleted sandbox's history as the other services write it (a workflow whose first step
// ran twice, values journaled and cached), and stores that count the drop work done on them.
import { Aggregates, encode, ev, runId, valueKey, workflowId, type DomainEvent } from "@ephemera/events";
import type { EventStore, ValueStore } from "@ephemera/eventstore";
import type { OutputStore } from "./outputs.js";
import { spec } from "./scenario.testkit.js";

/** One sandbox incarnation: its journal keys and cached runs, for assertions. */
export function sandboxOf(name: string, routingKey: string) {
  const create = workflowId(routingKey, "db", "create");
  const provision1 = runId(create, "provision", 1);
  const provision2 = runId(create, "provision", 2);
  const seed1 = runId(create, "seed", 1);
  return {
    name, routingKey, create, provision1, provision2, seed1,
    /** Every value it journals: a failed attempt's (taken while the cache was down), the retry's, and the next step's. */
    keys: [valueKey(provision1, "host"), valueKey(provision2, "host"), valueKey(provision2, "password"), valueKey(seed1, "marker")],
    /** What a drop addresses: every output each step declares, for every attempt it dispatched. */
    addressed: [provision1, provision2].flatMap((r) => [valueKey(r, "host"), valueKey(r, "password")]).concat(valueKey(seed1, "marker")),
    runs: [provision1, provision2, seed1],
  };
}
export type SandboxOf = ReturnType<typeof sandboxOf>;

export function history(store: EventStore, values: ValueStore, outputs: OutputStore) {
  const append = async (aggregate: string, id: string, ...events: DomainEvent[]) => {
    const current = await store.read(aggregate, id);
    await store.append(aggregate, id, current, events.map(encode), { source: "test" });
  };
  return {
    append,
    publishPlugin: () => append(Aggregates.plugin, "hello-db", ev("ephemera.plugin.published.v1", { name: "hello-db", version: "1.0.0", spec })),
    /** Created, its create workflow run (provision failed once, then succeeded; seed succeeded), outputs journaled and cached. */
    create: async (s: SandboxOf) => {
      await append(Aggregates.sandbox, s.name, ev("ephemera.sandbox.created.v1", { name: s.name, routingKey: s.routingKey }));
      await append(Aggregates.workflow, s.create,
        ev("ephemera.workflow.started.v1", {
          workflowId: s.create, sandbox: s.name, routingKey: s.routingKey, resource: "db", phase: "create", plugin: "hello-db", version: "1.0.0",
          cluster: "local", steps: [{ name: "provision" }, { name: "seed", dependsOn: ["provision"] }],
        }),
        ev("ephemera.workflow.step_dispatched.v1", { step: "provision", runId: s.provision1, attempt: 1 }),
        ev("ephemera.workflow.step_dispatched.v1", { step: "provision", runId: s.provision2, attempt: 2 }),
        ev("ephemera.workflow.step_succeeded.v1", { step: "provision", runId: s.provision2 }),
        ev("ephemera.workflow.step_dispatched.v1", { step: "seed", runId: s.seed1, attempt: 1 }),
        ev("ephemera.workflow.step_succeeded.v1", { step: "seed", runId: s.seed1 }));
      for (const key of s.keys) await values.put(key, Buffer.from(`value of ${key}`));
      await outputs.write(s.provision2, s.routingKey, [{ name: "host", value: Buffer.from("db") }]);
      await outputs.write(s.seed1, s.routingKey, [{ name: "marker", value: Buffer.from("m") }]);
    },
    delete: (s: SandboxOf) => append(Aggregates.sandbox, s.name, ev("ephemera.sandbox.deleted.v1", {})),
    /** Its `outputs.dropped` records. */
    dropped: async (s: SandboxOf) => (await store.read(Aggregates.outputs, s.routingKey)).events,
    /** Its values still in the journal, and its runs still in the cache. */
    left: async (s: SandboxOf) => {
      const journaled = [];
      for (const key of s.keys) if (await values.read(key)) journaled.push(key);
      const cached = [];
      for (const run of s.runs) if ((await outputs.read(run)).size) cached.push(run);
      return { journaled, cached };
    },
  };
}

/** Every call that drops or lists something, in order: what a start costs in drop work. */
export function countingStores(values: ValueStore, outputs: OutputStore) {
  const calls: string[] = [];
  const countedValues: ValueStore = {
    put: (k, v) => values.put(k, v),
    get: (k, d) => values.get(k, d),
    read: (k) => values.read(k),
    digest: (k) => values.digest(k),
    remove: (keys) => { calls.push(`remove ${keys.join(" ")}`); return values.remove(keys); },
    drop: (prefix) => { calls.push(`list the journal for ${prefix}`); return values.drop(prefix); },
  };
  const countedOutputs: OutputStore = {
    read: (run) => outputs.read(run),
    write: (run, rk, o) => outputs.write(run, rk, o),
    dropSandbox: (rk) => { calls.push(`drop cached ${rk}`); return outputs.dropSandbox(rk); },
  };
  return { calls, values: countedValues, outputs: countedOutputs };
}

export const dropCalls = (s: SandboxOf) => [`remove ${s.addressed.join(" ")}`, `drop cached ${s.routingKey}`];
