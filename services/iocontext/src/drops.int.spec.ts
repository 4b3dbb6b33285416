// What an IO context start costs in drops, against NATS and Redis: nothing for sandboxes
// dropped before, one drop by key for each deleted while it was down, once, touching only
// that sandbox's values, and recorded once when two IO contexts start at the same moment.
import { Aggregates, ev } from "@ephemera/events";
import { connectNats, JetStreamEventStore, JetStreamLeaseStore, JetStreamSnapshotStore, JetStreamValueStore, type EventStore, type LeaseStore, type Projection } from "@ephemera/eventstore";
import { waitFor } from "@ephemera/kit";
import { TEST_KEY } from "../../../test/support/keys.js";
import { testNats } from "../../../test/support/servers.js";
import { countingStores, dropCalls, history, sandboxOf, type SandboxOf } from "./drops.testkit.js";
import { openRedis, start, type Redis, type RunningIOContext } from "./index.js";
import { RedisOutputStore } from "./outputs.redis.js";
import { recordingLogger } from "./scenario.testkit.js";

type NatsConnection = Awaited<ReturnType<typeof connectNats>>;

describe("IO context start: drops of deleted sandboxes' outputs", () => {
  let nc: NatsConnection;
  let prefix: string;
  let cleanupStreams: (nc: NatsConnection) => Promise<void>;
  let store: EventStore;
  let values: JetStreamValueStore;
  let snapshots: JetStreamSnapshotStore;
  let redis: Redis;
  let outputs: RedisOutputStore;
  let h: ReturnType<typeof history>;
  const running: RunningIOContext[] = [];

  /** An IO context on this prefix whose drop work is counted (and whose log lines are kept). */
  const startCounted = async (withSnapshots = false, leases?: LeaseStore) => {
    const counted = countingStores(values, outputs);
    const { logger, lines } = recordingLogger();
    const service = await start({ listen: "127.0.0.1:0", prefix, keys: [TEST_KEY] }, {
      store, logger, values: counted.values, outputs: counted.outputs,
      ...(withSnapshots ? { snapshots: { store: snapshots, fingerprint: "code-1" } } : {}),
      ...(leases ? { leases, leaseTtlMs: 600 } : {}),
    });
    running.push(service);
    return { service, calls: counted.calls, lines };
  };
  const stop = async (service: RunningIOContext) => {
    running.splice(running.indexOf(service), 1);
    await service.stop();
  };
  const droppedAll = (sandboxes: SandboxOf[]) =>
    waitFor(async () => (await Promise.all(sandboxes.map(h.dropped))).every((d) => d.length === 1), { what: "the drops to be recorded" });

  beforeEach(async () => {
    const t = testNats("drops");
    prefix = t.prefix;
    cleanupStreams = t.cleanup;
    nc = await connectNats(t.url, "drops-test");
    store = await JetStreamEventStore.open(nc, { prefix });
    values = await JetStreamValueStore.open(nc, prefix);
    snapshots = await JetStreamSnapshotStore.open(nc, prefix);
    redis = openRedis(process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379");
    outputs = new RedisOutputStore(redis, prefix);
    h = history(store, values, outputs);
    await h.publishPlugin();
  });

  afterEach(async () => {
    for (const service of running.splice(0)) await service.stop();
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length) await redis.del(...keys);
    await redis.quit();
    await cleanupStreams(nc);
    await nc.close();
  });

  it("does no drop work at a start after N sandboxes deleted and dropped", async () => {
    const gone = Array.from({ length: 6 }, (_, i) => sandboxOf(`gone-${i}`, `rkgone${i}`));
    const kept = sandboxOf("kept", "rkkept");
    const first = await startCounted();
    for (const s of [...gone, kept]) await h.create(s);
    for (const s of gone) await h.delete(s);
    await droppedAll(gone);
    for (const s of gone) expect(await h.left(s)).toEqual({ journaled: [], cached: [] });
    expect(first.calls).toEqual(gone.flatMap(dropCalls));
    await stop(first.service);

    const second = await startCounted();
    // Due drops are queued before start() returns: any would show here.
    expect(second.calls).toEqual([]);
    // And one queued behind them would run after them: a delete now costs that sandbox's drop alone.
    await h.delete(kept);
    await droppedAll([kept]);
    expect(second.calls).toEqual(dropCalls(kept));
    expect(await h.left(kept)).toEqual({ journaled: [], cached: [] });
  });

  it("drops a sandbox deleted while no IO context ran at the next start, once, and nothing of another sandbox", async () => {
    const deleted = sandboxOf("deleted", "rkdeleted");
    const live = sandboxOf("live", "rklive");
    await h.create(deleted);
    await h.create(live);
    await h.delete(deleted);

    const first = await startCounted();
    await droppedAll([deleted]);
    await stop(first.service);
    expect(first.calls).toEqual(dropCalls(deleted));
    expect(await h.left(deleted)).toEqual({ journaled: [], cached: [] });
    expect(await h.left(live)).toEqual({ journaled: live.keys, cached: live.runs.filter((r) => r !== live.provision1) });
    const [record] = await h.dropped(deleted);
    expect(record?.data).toEqual({ sandbox: "deleted", values: 4, runs: 2 });

    const second = await startCounted();
    await stop(second.service);
    expect(second.calls).toEqual([]);
    expect(await h.dropped(deleted)).toHaveLength(1);
  });

  it("drops the values a run journals after its sandbox was dropped, once its result arrives", async () => {
    const forced = sandboxOf("forced", "rkforced");
    const io = await startCounted();
    await h.create(forced);
    await h.delete(forced);
    await droppedAll([forced]);
    // A run still ending under a forced delete: the runner journals its value, then its result.
    const sha256 = await values.put(`${forced.seed1}/marker`, Buffer.from("late"));
    await h.append(Aggregates.steprun, forced.seed1,
      ev("ephemera.steprun.succeeded.v1", { runId: forced.seed1, step: "seed", outputs: [{ name: "marker", size: 4, sha256 }] }));
    const late = [`remove ${forced.seed1}/marker`, `drop cached ${forced.routingKey}`];
    await waitFor(async () => io.calls.length === 4 && (await values.read(`${forced.seed1}/marker`)) === undefined, { what: "the late value to go" });
    expect(io.calls).toEqual([...dropCalls(forced), ...late]);
    expect(await h.dropped(forced)).toHaveLength(1);
  });

  it("records the drop once when two IO contexts start at the same moment", async () => {
    const deleted = sandboxOf("deleted", "rkdeleted");
    const live = sandboxOf("live", "rklive");
    await h.create(deleted);
    await h.create(live);
    await h.delete(deleted);

    const [a, b] = await Promise.all([startCounted(), startCounted()]);
    await droppedAll([deleted]);
    // stop() waits for a drop in hand: after it, both are done with theirs.
    await Promise.all([stop(a.service), stop(b.service)]);
    expect(await h.dropped(deleted)).toHaveLength(1);
    expect(await h.left(deleted)).toEqual({ journaled: [], cached: [] });
    expect((await h.left(live)).journaled).toEqual(live.keys);
    // Each did that sandbox's drop at most once, and neither failed at it.
    for (const c of [a, b]) {
      expect(dropCalls(deleted).slice(0, c.calls.length)).toEqual(c.calls);
      expect(c.lines.filter((l) => l.msg?.includes("cannot drop"))).toEqual([]);
    }
  });

  it("restarted from its snapshot: follows from its position, holds no deleted sandbox, drops only the one deleted while down, and equals a full replay", async () => {
    const gone = Array.from({ length: 4 }, (_, i) => sandboxOf(`gone-${i}`, `rkgone${i}`));
    const kept = sandboxOf("kept", "rkkept");
    const live = sandboxOf("live", "rklive");
    const first = await startCounted(true);
    for (const s of [...gone, kept, live]) await h.create(s);
    for (const s of gone) await h.delete(s);
    await droppedAll(gone);
    await stop(first.service);
    const stoppedAt = first.service.feed.position;
    await h.delete(kept);

    const second = await startCounted(true);
    expect(second.service.feed.startedFrom).toBe(stoppedAt);
    await droppedAll([kept]);
    expect(second.calls).toEqual(dropCalls(kept));
    const held = second.service.projections;
    expect([...held.sandboxes.entries()].map(([name]) => name)).toEqual(["live"]);
    expect([...held.workflows.entries()].every(([id]) => id.startsWith("rklive."))).toBe(true);

    const replayed = await startCounted(false);
    expect(replayed.service.feed.startedFrom).toBe(0);
    await replayed.service.feed.waitFor(second.service.feed.position);
    const sorted = (p: Projection<unknown>) => [...p.entries()].sort(([a], [b]) => a.localeCompare(b));
    for (const name of ["sandboxes", "workflows", "plugins"] as const) {
      expect(sorted(held[name] as Projection<unknown>)).toEqual(sorted(replayed.service.projections[name] as Projection<unknown>));
    }
  });

  it("drops in one replica at a time, the holder of the drops' lease; the other drops once it is handed over", async () => {
    const leases = await JetStreamLeaseStore.open(nc, prefix);
    const first = sandboxOf("first", "rkfirst");
    const second = sandboxOf("second", "rksecond");
    await h.create(first);
    await h.create(second);
    const a = await startCounted(false, leases);
    const b = await startCounted(false, leases);
    await h.delete(first);
    await droppedAll([first]);
    // One of them did the drop; the other did no drop work at all.
    const [holder, other] = a.calls.length ? [a, b] : [b, a];
    await waitFor(() => holder.calls.length === 2, { what: "the holder's drop calls" });
    expect(holder.calls).toEqual(dropCalls(first));
    expect(other.calls).toEqual([]);
    // The holder goes away (releasing the lease): the other drops the next sandbox deleted.
    await stop(holder.service);
    await h.delete(second);
    await droppedAll([second]);
    await waitFor(() => other.calls.length === 2, { what: "the other's drop calls" });
    expect(other.calls).toEqual(dropCalls(second));
    expect(await h.left(second)).toEqual({ journaled: [], cached: [] });
  });
});
