// The fork reconciler on the in-memory event store with a cluster the test controls: what
// it asks of the cluster and what it records, across a restart, a superseded generation
// and a report that cannot be recorded at first; which sandboxes it holds, and from where
// a restart with its snapshot follows.
import * as pb from "@ephemera/proto";
import { Aggregates, decode, encode, ev, type DomainEvent } from "@ephemera/events";
import { InMemoryEventStore, InMemoryLeaseStore, InMemorySnapshotStore, type Projection } from "@ephemera/eventstore";
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
  /** Removals (no placement) wait for the test too, instead of being available at once. */
  holdRemovals = false;
  async apply(d: ForkDesire, wanted: pb.Fork[]): Promise<ApplyResult> {
    this.applied.push({ generation: d.generation, forks: wanted.length });
    return { kind: "applied", forks: wanted.length ? [placement] : [] };
  }
  async whenAvailable(placements: pb.ForkPlacement[], done: (f?: pb.ForkFailure) => void): Promise<() => void> {
    const w = { placements, done, cancelled: false };
    if (!placements.length && !this.holdRemovals) done();
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
const deleted = (forced: boolean) => ev("ephemera.sandbox.deleted.v1", { forced });
const sorted = <S>(p: Projection<S>) => [...p.entries()].sort(([a], [b]) => a.localeCompare(b));
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

  it("reconciles in one replica of a cluster at a time: the lease's holder; the other takes over, and waits again for what was applied, once the holder stops", async () => {
    const leases = new InMemoryLeaseStore();
    const replica = async () => {
      const r = new ForkReconciler({ store, cluster, clusterName: "c1", logger, leases, leaseTtlMs: 500 });
      await r.start();
      running.push(r);
      return r;
    };
    const a = await replica();
    await waitFor(() => a.reconciling, { what: "A to hold the lease" });
    const b = await replica();
    await append(store, Aggregates.sandbox, "sb", [created, requested(1, [fork])]);
    await waitFor(() => cluster.waiting.length === 1, { timeoutMs: 5000, what: "the wait for availability" });
    // Both replicas read the request; one applied it, once.
    await waitFor(() => b.desires.get("sb") !== undefined, { what: "B to fold the request" });
    expect(cluster.applied).toEqual([{ generation: 1, forks: 1 }]);
    expect(b.reconciling).toBe(false);
    // A goes away before the forks are available: B takes over and waits again (applies nothing twice).
    await a.stop();
    running.splice(running.indexOf(a), 1);
    expect(cluster.waiting[0]!.cancelled).toBe(true);
    await waitFor(() => b.reconciling && cluster.waiting.length === 2, { timeoutMs: 5000, what: "B to wait for the applied forks" });
    expect(cluster.applied).toEqual([{ generation: 1, forks: 1 }]);
    cluster.waiting[1]!.done();
    await waitFor(async () => (await reports(store)).length === 2, { timeoutMs: 5000, what: "available recorded" });
    expect(await reports(store)).toEqual(["applied:1", "available:1"]);
  });

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

  it("keeps a deleted sandbox's desire until the generation removing its forks is answered, then lets it and its record go", async () => {
    const r = await start();
    await append(store, Aggregates.sandbox, "sb", [created, requested(1, [fork])]);
    await waitFor(() => cluster.waiting.length === 1, { timeoutMs: 5000, what: "the wait for availability" });
    cluster.waiting[0]!.done();
    await waitFor(async () => (await reports(store)).includes("available:1"), { timeoutMs: 5000, what: "available recorded" });
    // Force-deleted: its forks are still on the cluster, removed as generation 2, held open here.
    cluster.holdRemovals = true;
    await append(store, Aggregates.sandbox, "sb", [deleted(true)]);
    await waitFor(() => cluster.waiting.length === 2, { timeoutMs: 5000, what: "the removal applied" });
    await r.feed.waitFor(await store.position());
    expect(cluster.applied).toEqual([{ generation: 1, forks: 1 }, { generation: 1, forks: 0 }]); // the desire asked 1; the removal is one more
    expect(r.desires.get("sb")?.state?.deleted).toBe(true);
    expect(r.records.get("rk1")?.state.applied?.generation).toBe(2);
    cluster.waiting[1]!.done();
    await waitFor(() => r.desires.get("sb") === undefined, { timeoutMs: 5000, what: "the settled desire to leave memory" });
    expect(await reports(store)).toEqual(["applied:1", "available:1", "applied:2", "available:2"]);
    expect([r.desires.size, r.records.size]).toEqual([0, 0]);
  });

  it("lets a normally deleted sandbox go at its deletion: its forks were removed before it", async () => {
    const r = await start();
    await append(store, Aggregates.sandbox, "sb", [created, requested(1, [fork])]);
    await waitFor(() => cluster.waiting.length === 1, { timeoutMs: 5000, what: "the wait for availability" });
    cluster.waiting[0]!.done();
    await append(store, Aggregates.sandbox, "sb", [ev("ephemera.sandbox.deleting.v1", { reason: "requested" }), requested(2, [])]);
    await waitFor(async () => (await reports(store)).includes("available:2"), { timeoutMs: 5000, what: "the removal answered" });
    await r.feed.waitFor(await store.position());
    expect(r.desires.get("sb")?.state?.deleted).toBe(false); // deleting, not deleted: kept
    await append(store, Aggregates.sandbox, "sb", [deleted(false)]);
    await r.feed.waitFor(await store.position());
    expect([r.desires.size, r.records.size]).toEqual([0, 0]);
    // A sandbox of the same name again starts from nothing: no earlier one is owed anything.
    await append(store, Aggregates.sandbox, "sb", [ev("ephemera.sandbox.created.v1", { name: "sb", routingKey: "rk2", spec: { cluster: "c1" } })]);
    await r.feed.waitFor(await store.position());
    expect(r.desires.get("sb")?.state).toMatchObject({ routingKey: "rk2", earlier: [] });
  });

  it("restarted with its snapshot, follows from its position, catches up live sandboxes only, and holds what a full replay does", async () => {
    const snapshots = new InMemorySnapshotStore();
    const withSnapshots = { store: snapshots, fingerprint: "code-1" };
    const first = new ForkReconciler({ store, cluster, clusterName: "c1", logger, snapshots: withSnapshots });
    await first.start();
    expect(first.feed.startedFrom).toBe(0);
    const sandbox = (n: number) => ev("ephemera.sandbox.created.v1", { name: `sb${n}`, routingKey: `rk${n}`, spec: { cluster: "c1" } });
    for (let n = 0; n < 4; n++) await append(store, Aggregates.sandbox, `sb${n}`, [sandbox(n)]);
    for (let n = 0; n < 3; n++) await append(store, Aggregates.sandbox, `sb${n}`, [deleted(false)]);
    await first.feed.waitFor(await store.position());
    await first.stop();
    expect(snapshots.writes).toBe(1);
    const stoppedAt = first.feed.position;
    await append(store, Aggregates.sandbox, "sb9", [sandbox(9), ev("ephemera.sandbox.forks_requested.v1", { sandbox: "sb9", routingKey: "rk9", cluster: "c1", generation: 1, forks: [fork] })]);

    const restarted = new ForkReconciler({ store, cluster, clusterName: "c1", logger, snapshots: withSnapshots });
    running.push(restarted);
    await restarted.start();
    expect(restarted.feed.startedFrom).toBe(stoppedAt);
    expect(restarted.feed.startedFrom).toBeGreaterThan(0);
    expect([...restarted.desires.entries()].map(([name]) => name).sort()).toEqual(["sb3", "sb9"]);
    await waitFor(() => cluster.waiting.length === 1, { timeoutMs: 5000, what: "the sandbox asked for after the snapshot reconciled" });
    expect(cluster.applied).toEqual([{ generation: 1, forks: 1 }]);
    const replayed = new ForkReconciler({ store, cluster: new TestCluster(), clusterName: "other", logger });
    await replayed.feed.start();
    await restarted.feed.waitFor(await store.position());
    expect(sorted<unknown>(restarted.desires as Projection<unknown>)).toEqual(sorted<unknown>(replayed.desires as Projection<unknown>));
    expect(sorted<unknown>(restarted.records as Projection<unknown>)).toEqual(sorted<unknown>(replayed.records as Projection<unknown>));
    await replayed.feed.stop();
  });
});
