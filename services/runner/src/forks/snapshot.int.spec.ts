// The fork reconciler on JetStream, restarted on a history of deleted sandboxes whose forks
// were removed: it restores its snapshot, follows the stream from its position, holds no
// deleted sandbox, and ends where a full replay does.
import type { NatsConnection } from "@nats-io/nats-core";
import * as pb from "@ephemera/proto";
import { Aggregates, encode, ev, type DomainEvent } from "@ephemera/events";
import { JetStreamEventStore, JetStreamSnapshotStore, connectNats, type Projection } from "@ephemera/eventstore";
import { createLogger, waitFor } from "@ephemera/kit";
import { ForkReconciler, type ApplyResult, type ForkCluster } from "./reconciler.js";
import type { ForkDesire } from "./state.js";
import { NATS_URL, testNats } from "../../../../test/support/servers.js";

const logger = createLogger("runner", "silent");
const sorted = <S>(p: Projection<S>) => [...p.entries()].sort(([a], [b]) => a.localeCompare(b));
const fork = pb.Fork.fromPartial({ forkOf: { kind: "Deployment", namespace: "shop", name: "orders" } });

/** A cluster whose forks are available as soon as they are applied; counts the applies per sandbox. */
class AvailableCluster implements ForkCluster {
  readonly applies = new Map<string, number>();
  async apply(d: ForkDesire, wanted: pb.Fork[]): Promise<ApplyResult> {
    this.applies.set(d.sandbox, (this.applies.get(d.sandbox) ?? 0) + 1);
    return { kind: "applied", forks: wanted.map((f) => pb.ForkPlacement.fromPartial({ fork: `Deployment shop/${f.forkOf?.name}`, workload: { kind: "Deployment", namespace: "shop", name: `orders-${d.routingKey}` } })) };
  }
  async whenAvailable(_p: pb.ForkPlacement[], done: () => void): Promise<() => void> {
    done();
    return () => undefined;
  }
  async stop(): Promise<void> {}
}

describe("fork reconciler restarted on a history of deleted sandboxes", () => {
  let nc: NatsConnection;
  let store: JetStreamEventStore;
  let snapshots: JetStreamSnapshotStore;
  let cleanup: (nc: NatsConnection) => Promise<void>;
  const running: ForkReconciler[] = [];

  beforeEach(async () => {
    const t = testNats("forksnap");
    cleanup = t.cleanup;
    nc = await connectNats(NATS_URL, "forks-snapshot");
    store = await JetStreamEventStore.open(nc, { prefix: t.prefix });
    snapshots = await JetStreamSnapshotStore.open(nc, t.prefix);
  });
  afterEach(async () => {
    for (const r of running.splice(0)) await r.stop();
    await store.close();
    await cleanup(nc);
    await nc.close();
  });

  const reconciler = (cluster: ForkCluster, withSnapshots: boolean) => {
    const r = new ForkReconciler({ store, cluster, clusterName: "c1", logger, ...(withSnapshots ? { snapshots: { store: snapshots, fingerprint: "code-1" } } : {}) });
    running.push(r);
    return r;
  };
  const append = async (id: string, ...events: DomainEvent[]) => {
    const current = await store.read(Aggregates.sandbox, id);
    await store.append(Aggregates.sandbox, id, current, events.map(encode), { source: "test" });
  };
  const requested = (name: string, generation: number, forks: pb.Fork[]) =>
    ev("ephemera.sandbox.forks_requested.v1", { sandbox: name, routingKey: `rk-${name}`, cluster: "c1", generation, forks, resources: [] });
  const answered = (r: ForkReconciler, name: string, generation: number) =>
    waitFor(() => (r.records.get(`rk-${name}`)?.state.reported ?? 0) >= generation, { timeoutMs: 10_000, what: `${name}'s generation ${generation} answered` });
  /** A sandbox whose fork is applied and available. */
  const withFork = async (r: ForkReconciler, name: string) => {
    await append(name, ev("ephemera.sandbox.created.v1", { name, routingKey: `rk-${name}`, spec: { cluster: "c1" } }), requested(name, 1, [fork]));
    await answered(r, name, 1);
  };

  it("restores its snapshot, follows from its position, holds no deleted sandbox, and equals a full replay", async () => {
    const cluster = new AvailableCluster();
    const first = reconciler(cluster, true);
    await first.start();
    expect(first.feed.startedFrom).toBe(0);
    for (let i = 0; i < 6; i++) await withFork(first, `sb${i}`);
    // Three deleted as the sandbox service does (their forks removed first), two forced (the reconciler removes them).
    for (let i = 0; i < 3; i++) {
      await append(`sb${i}`, ev("ephemera.sandbox.deleting.v1", { reason: "requested" }), requested(`sb${i}`, 2, []));
      await answered(first, `sb${i}`, 2);
      await append(`sb${i}`, ev("ephemera.sandbox.deleted.v1", { forced: false }));
    }
    for (const i of [3, 4]) await append(`sb${i}`, ev("ephemera.sandbox.deleting.v1", { force: true, reason: "requested" }), ev("ephemera.sandbox.deleted.v1", { forced: true }));
    await waitFor(async () => first.desires.size === 1 && first.feed.position >= (await store.position()), { timeoutMs: 10_000, what: "the deleted sandboxes to leave memory" });
    expect([[...first.desires.entries()].map(([n]) => n), first.records.size]).toEqual([["sb5"], 1]);
    await first.stop();
    running.splice(running.indexOf(first), 1);
    const stoppedAt = first.feed.position;
    const appliesBefore = new Map(cluster.applies);

    // Written past the snapshot: a new sandbox, and sb5 deleted by force.
    await append("late", ev("ephemera.sandbox.created.v1", { name: "late", routingKey: "rk-late", spec: { cluster: "c1" } }), requested("late", 1, [fork]));
    await append("sb5", ev("ephemera.sandbox.deleting.v1", { force: true, reason: "requested" }), ev("ephemera.sandbox.deleted.v1", { forced: true }));

    const restarted = reconciler(cluster, true);
    await restarted.start();
    expect(restarted.feed.startedFrom).toBe(stoppedAt);
    expect(restarted.feed.startedFrom).toBeGreaterThan(0);
    await answered(restarted, "late", 1);
    await waitFor(async () => restarted.desires.get("sb5") === undefined && restarted.feed.position >= (await store.position()), { timeoutMs: 10_000, what: "sb5's forks removed and the feed at the end" });
    expect([...restarted.desires.entries()].map(([n]) => n)).toEqual(["late"]);
    // What the snapshot covered was never reconciled again: only what came after it.
    for (let i = 0; i < 5; i++) expect(cluster.applies.get(`sb${i}`)).toBe(appliesBefore.get(`sb${i}`));
    expect([cluster.applies.get("sb5")! - appliesBefore.get("sb5")!, cluster.applies.get("late")]).toEqual([1, 1]);

    const replayed = reconciler(new AvailableCluster(), false);
    await replayed.feed.start();
    expect(replayed.feed.startedFrom).toBe(0);
    expect(sorted<unknown>(restarted.desires as Projection<unknown>)).toEqual(sorted<unknown>(replayed.desires as Projection<unknown>));
    expect(sorted<unknown>(restarted.records as Projection<unknown>)).toEqual(sorted<unknown>(replayed.records as Projection<unknown>));
  });
});
