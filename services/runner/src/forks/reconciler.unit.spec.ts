// The fork reconciler on the in-memory event store with a cluster the test controls: what
// it asks of the cluster and what it records, across a restart, a superseded generation
// and a report that cannot be recorded at first.
import * as pb from "@ephemera/proto";
import { Aggregates, decode, encode, ev, type DomainEvent } from "@ephemera/events";
import { InMemoryEventStore } from "@ephemera/eventstore";
import { createLogger, waitFor } from "@ephemera/kit";
import { ForkReconciler, type ApplyResult, type ForkCluster } from "./reconciler.js";
import type { ForkDesire } from "./state.js";

const logger = createLogger("test", "silent");
const fork = pb.Fork.fromPartial({ forkOf: { kind: "Deployment", namespace: "shop", name: "orders" } });
const placement = pb.ForkPlacement.fromPartial({ fork: "Deployment shop/orders", workload: { kind: "Deployment", namespace: "shop", name: "orders-rk1" } });

/** A cluster whose forks become available when the test says so. */
class TestCluster implements ForkCluster {
  applied: Array<{ generation: number; forks: number }> = [];
  waiting: Array<{ placements: pb.ForkPlacement[]; done: (f?: pb.ForkFailure) => void; cancelled: boolean }> = [];
  async apply(d: ForkDesire, wanted: pb.Fork[]): Promise<ApplyResult> {
    this.applied.push({ generation: d.generation, forks: wanted.length });
    return { kind: "applied", forks: wanted.length ? [placement] : [] };
  }
  async whenAvailable(placements: pb.ForkPlacement[], done: (f?: pb.ForkFailure) => void): Promise<() => void> {
    const w = { placements, done, cancelled: false };
    if (!placements.length) done();
    else this.waiting.push(w);
    return () => { w.cancelled = true; };
  }
  async stop(): Promise<void> {}
}

async function append(store: InMemoryEventStore, aggregate: string, id: string, events: DomainEvent[]): Promise<void> {
  const current = await store.read(aggregate, id);
  await store.append(aggregate, id, { revision: current.revision, version: current.version }, events.map(encode), { source: "test" });
}

const reports = async (store: InMemoryEventStore) => (await store.read(Aggregates.forks, "rk1")).events.map((e) => {
  const d = decode(e)!;
  return `${d.type.replace(/^ephemera\.forks\.|\.v1$/g, "")}:${(d.data as { generation: number }).generation}`;
});

const created = ev("ephemera.sandbox.created.v1", { name: "sb", routingKey: "rk1", spec: { cluster: "c1" } });
const requested = (generation: number, forks: pb.Fork[]) =>
  ev("ephemera.sandbox.forks_requested.v1", { sandbox: "sb", routingKey: "rk1", cluster: "c1", generation, forks, resources: [] });

describe("the fork reconciler", () => {
  let store: InMemoryEventStore;
  let cluster: TestCluster;
  let running: ForkReconciler[] = [];
  const start = async (clusterName = "c1") => {
    const r = new ForkReconciler({ store, cluster, clusterName, logger });
    await r.start();
    running.push(r);
    return r;
  };
  beforeEach(() => { store = new InMemoryEventStore(); cluster = new TestCluster(); running = []; });
  afterEach(async () => { for (const r of running) await r.stop(); });

  it("applies what its cluster's sandbox asks, records applied, then available once the cluster says so; ignores other clusters", async () => {
    await start();
    await append(store, Aggregates.sandbox, "other", [ev("ephemera.sandbox.created.v1", { name: "other", routingKey: "rk9", spec: { cluster: "c2" } }),
      ev("ephemera.sandbox.forks_requested.v1", { sandbox: "other", routingKey: "rk9", cluster: "c2", generation: 1, forks: [fork] })]);
    await append(store, Aggregates.sandbox, "sb", [created, requested(1, [fork])]);
    await waitFor(() => cluster.waiting.length === 1, { timeoutMs: 5000, what: "the wait for availability" });
    expect(cluster.applied).toEqual([{ generation: 1, forks: 1 }]);
    expect(await reports(store)).toEqual(["applied:1"]);
    cluster.waiting[0]!.done();
    await waitFor(async () => (await reports(store)).length === 2, { timeoutMs: 5000, what: "available recorded" });
    expect(await reports(store)).toEqual(["applied:1", "available:1"]);
  });

  it("after a restart, waits again for what it applied without applying it again", async () => {
    const first = await start();
    await append(store, Aggregates.sandbox, "sb", [created, requested(1, [fork])]);
    await waitFor(() => cluster.waiting.length === 1, { timeoutMs: 5000, what: "the first wait" });
    await first.stop();
    running = [];
    await start();
    await waitFor(() => cluster.waiting.length === 2, { timeoutMs: 5000, what: "the wait again" });
    expect(cluster.applied).toEqual([{ generation: 1, forks: 1 }]);
    cluster.waiting[1]!.done();
    await waitFor(async () => (await reports(store)).includes("available:1"), { timeoutMs: 5000, what: "available recorded" });
  });

  it("records nothing for a generation superseded while it rolled out; the next one is applied and answered", async () => {
    await start();
    await append(store, Aggregates.sandbox, "sb", [created, requested(1, [fork])]);
    await waitFor(() => cluster.waiting.length === 1, { timeoutMs: 5000, what: "the first wait" });
    await append(store, Aggregates.sandbox, "sb", [requested(2, [])]);
    await waitFor(async () => (await reports(store)).includes("available:2"), { timeoutMs: 5000, what: "generation 2 answered" });
    expect(cluster.waiting[0]!.cancelled).toBe(true);
    cluster.waiting[0]!.done(); // late: cancelled, and superseded anyway
    expect(await reports(store)).toEqual(["applied:1", "applied:2", "available:2"]);
  });

  it("answers skipped where the cluster runs no workloads, once per generation", async () => {
    cluster.apply = async () => ({ kind: "skipped", message: "no workloads" });
    await start();
    await append(store, Aggregates.sandbox, "sb", [created, requested(1, [fork])]);
    await waitFor(async () => (await reports(store)).length === 1, { timeoutMs: 5000, what: "skipped recorded" });
    await append(store, Aggregates.sandbox, "sb", [ev("ephemera.sandbox.deleting.v1", { reason: "requested" })]);
    await start(); // a second reconciler catching up finds nothing owed
    expect(await reports(store)).toEqual(["skipped:1"]);
  });

  it("tries a catch-up at start again when the cluster could not be reached", async () => {
    await append(store, Aggregates.sandbox, "sb", [created, requested(1, [fork])]);
    let calls = 0;
    const apply = cluster.apply.bind(cluster);
    cluster.apply = async (d: ForkDesire, wanted: pb.Fork[]) => {
      if (calls++ === 0) throw new Error("connect ECONNREFUSED");
      return apply(d, wanted);
    };
    await start();
    await waitFor(() => cluster.waiting.length === 1, { timeoutMs: 5000, what: "the second try to apply" });
    expect(calls).toBe(2);
    expect(await reports(store)).toEqual(["applied:1"]);
  });
});
