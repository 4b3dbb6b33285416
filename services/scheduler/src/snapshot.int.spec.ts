// The scheduler on JetStream, restarted on a history of deleted sandboxes: it restores its
// snapshot, follows the stream from its position, holds only what is live and ends where a
// full replay does.
import * as pb from "@ephemera/proto";
import { Aggregates, encode, ev, workflowId, type DomainEvent } from "@ephemera/events";
import {
  InMemoryWorkQueue, JetStreamEventStore, JetStreamSnapshotStore, NO_AGGREGATE, connectNats, type Projection,
} from "@ephemera/eventstore";
import { createLogger, waitFor } from "@ephemera/kit";
import type { NatsConnection } from "@nats-io/nats-core";
import { testNats } from "../../../test/support/servers.js";
import { Scheduler } from "./scheduler.js";

const spec = pb.ResourcePluginSpec.fromPartial({
  runner: { image: "debian:bookworm-slim" },
  create: [{ name: "a" }, { name: "b" }],
  delete: [{ name: "z" }],
});
const logger = createLogger("test", "silent");
const sorted = <S>(p: Projection<S>) => [...p.entries()].sort(([a], [b]) => a.localeCompare(b));

describe("scheduler restarted on a history of deleted sandboxes", () => {
  let nc: NatsConnection;
  let store: JetStreamEventStore;
  let snapshots: JetStreamSnapshotStore;
  let queue: InMemoryWorkQueue<pb.StepDispatch>;
  let cleanup: (nc: NatsConnection) => Promise<void>;
  const running: Scheduler[] = [];

  beforeEach(async () => {
    const t = testNats("schsnap");
    cleanup = t.cleanup;
    nc = await connectNats("nats://127.0.0.1:4222", "scheduler-snapshot");
    store = await JetStreamEventStore.open(nc, { prefix: t.prefix });
    snapshots = await JetStreamSnapshotStore.open(nc, t.prefix);
    queue = new InMemoryWorkQueue();
    await store.append(Aggregates.plugin, "db", NO_AGGREGATE,
      [encode(ev("ephemera.plugin.published.v1", { name: "db", version: "1.0.0", spec, digest: "d" }))], { source: "test" });
  });
  afterEach(async () => {
    for (const s of running.splice(0)) await s.stop();
    await store.close();
    await cleanup(nc);
    await nc.close();
  });

  const start = async () => {
    const s = new Scheduler({ store, queue, logger, snapshots: { store: snapshots, fingerprint: "code-1" } });
    await s.start();
    running.push(s);
    return s;
  };
  const stop = async (s: Scheduler) => {
    running.splice(running.indexOf(s), 1);
    await s.stop();
  };
  const append = async (aggregate: string, id: string, events: DomainEvent[]) => {
    const cur = await store.read(aggregate, id);
    await store.append(aggregate, id, cur, events.map(encode), { source: "test" });
  };
  const resource = { name: "db", plugin: "db", version: "1.0.0", params: {} };
  const create = (name: string) => append(Aggregates.sandbox, name, [
    ev("ephemera.sandbox.created.v1", { name, routingKey: `rk-${name}`, spec: { cluster: "c1" }, resources: [resource] }),
    ev("ephemera.sandbox.resource_provision_requested.v1", { sandbox: name, routingKey: `rk-${name}`, cluster: "c1", resource }),
  ]);
  const finished = new Set<string>();
  /** Runs every dispatched step of the sandbox's create workflow to success, as a runner would report it. */
  const provision = async (s: Scheduler, name: string) => {
    const id = workflowId(`rk-${name}`, "db", "create");
    await waitFor(async () => {
      for (const { data: d } of queue.published) {
        if (d.workflowId !== id || finished.has(d.runId)) continue;
        finished.add(d.runId);
        await append(Aggregates.steprun, d.runId, [
          ev("ephemera.steprun.started.v1", { runId: d.runId, workflowId: d.workflowId, step: d.step, attempt: d.attempt, runner: "r1" }),
          ev("ephemera.steprun.succeeded.v1", { runId: d.runId, workflowId: d.workflowId, step: d.step, outputs: [] }),
        ]);
      }
      return s.workflows.get(id)?.state.status === "succeeded";
    }, { timeoutMs: 20_000, what: `${name} provisioned` });
  };

  it("restores its snapshot, follows from its position, holds no deleted sandbox nor its workflows, and equals a full replay", async () => {
    const first = await start();
    for (let i = 0; i < 5; i++) {
      await create(`sb${i}`);
      await provision(first, `sb${i}`);
    }
    for (let i = 0; i < 4; i++) {
      await append(Aggregates.sandbox, `sb${i}`, [
        ev("ephemera.sandbox.deleting.v1", { force: true, reason: "requested" }), ev("ephemera.sandbox.deleted.v1", { forced: true }),
      ]);
    }
    const end = await store.position();
    await first.feed.waitFor(end);
    expect({ sandboxes: first.sandboxes.size, workflows: first.workflows.size }).toEqual({ sandboxes: 1, workflows: 1 });
    await stop(first);
    await create("late");

    const restarted = await start();
    const replayed = new Scheduler({ store, queue, logger });
    await replayed.feed.start();
    expect(restarted.feed.startedFrom).toBe(end);
    await waitFor(() => restarted.workflows.get(workflowId("rk-late", "db", "create")), { what: "the late sandbox's workflow" });
    await replayed.feed.waitFor(await store.position());
    await restarted.feed.waitFor(await store.position());
    expect([...restarted.sandboxes.entries()].map(([n]) => n).sort()).toEqual(["late", "sb4"]);
    expect(restarted.workflows.size).toBe(2);
    for (const pick of [(s: Scheduler) => s.sandboxes, (s: Scheduler) => s.workflows, (s: Scheduler) => s.plugins] as const) {
      expect(sorted<unknown>(pick(restarted) as Projection<unknown>)).toEqual(sorted<unknown>(pick(replayed) as Projection<unknown>));
    }
    await replayed.feed.stop();
  });
});
