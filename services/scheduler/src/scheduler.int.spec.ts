// The scheduler against the real JetStream store: sandbox events in, workflows and
// dispatches out, step-run results recorded; a simulated runner stands in for pods.
import * as pb from "@ephemera/proto";
import { Aggregates, decode, encode, ev, sha256Hex, workflowId, type DomainEvent } from "@ephemera/events";
import { InMemoryWorkQueue, JetStreamEventStore, JetStreamLeaseStore, NO_AGGREGATE, ProjectionFaultError, connectNats, type EventStore } from "@ephemera/eventstore";
import { createLogger, waitFor } from "@ephemera/kit";
import type { NatsConnection } from "@nats-io/nats-core";
import { AckPolicy, DeliverPolicy, jetstreamManager } from "@nats-io/jetstream";
import { testNats } from "../../../test/support/servers.js";
import { Scheduler } from "./scheduler.js";

/** Step a's output x ("42"), as the runner journals it: its size and digest, the value in the output journal. */
const X_JOURNALED = { name: "x", value: Buffer.alloc(0), size: 2, sha256: sha256Hex(Buffer.from("42")) };

const spec = pb.ResourcePluginSpec.fromPartial({
  runner: { image: "debian:bookworm-slim" },
  create: [
    { name: "a", outputs: [{ name: "x", valueFromPath: "/tmp/x" }] },
    { name: "b", inputs: [{ name: "x", valueFromStep: { name: "a", output: "x" } }] },
    { name: "c", inputs: [{ name: "x", valueFromStep: { name: "a", output: "x" } }] },
  ],
  delete: [{ name: "z", inputs: [{ name: "x", valueFromStep: { name: "a", output: "x" } }] }],
});

describe("scheduler on JetStream", () => {
  let nc: NatsConnection;
  let store: EventStore;
  let queue: InMemoryWorkQueue<pb.StepDispatch>;
  let scheduler: Scheduler;
  let cleanup: (nc: NatsConnection) => Promise<void>;
  let prefix: string;

  beforeEach(async () => {
    ({ prefix, cleanup } = testNats("sch"));
    nc = await connectNats("nats://127.0.0.1:4222", "scheduler-test");
    store = await JetStreamEventStore.open(nc, { prefix });
    queue = new InMemoryWorkQueue();
    await store.append(Aggregates.plugin, "db", NO_AGGREGATE,
      [encode(ev("ephemera.plugin.published.v1", { name: "db", version: "1.0.0", spec, digest: "d" }))], { source: "test" });
  });
  afterEach(async () => {
    await scheduler?.stop();
    await cleanup(nc);
    await nc.close();
  });

  const startScheduler = async (policy: ConstructorParameters<typeof Scheduler>[0]["policy"] = {}) => {
    scheduler = new Scheduler({ store, queue, logger: createLogger("test", "silent"), policy });
    await scheduler.start();
  };
  const append = async (aggregate: string, id: string, events: DomainEvent[]) => {
    const cur = await store.read(aggregate, id);
    await store.append(aggregate, id, cur, events.map(encode), { source: "test" });
  };
  const resource = { name: "db", plugin: "db", version: "1.0.0", params: { p: "v" } };
  const createSandbox = () => append(Aggregates.sandbox, "sb", [
    ev("ephemera.sandbox.created.v1", { name: "sb", routingKey: "rk1", spec: { cluster: "c1" }, resources: [resource] }),
    ev("ephemera.sandbox.resource_provision_requested.v1", { sandbox: "sb", routingKey: "rk1", cluster: "c1", resource }),
  ]);
  const finish = (d: pb.StepDispatch, ok = true) => append(Aggregates.steprun, d.runId, [ev("ephemera.steprun.started.v1", {
    runId: d.runId, workflowId: d.workflowId, step: d.step, attempt: d.attempt, runner: "r1",
  }), ok
    ? ev("ephemera.steprun.succeeded.v1", { runId: d.runId, workflowId: d.workflowId, step: d.step, outputs: d.step === "a" ? [X_JOURNALED] : [] })
    : ev("ephemera.steprun.failed.v1", { runId: d.runId, workflowId: d.workflowId, step: d.step, failure: { step: d.step, runId: d.runId, exitCode: 2, reason: "Error" } })]);
  const workflowTypes = async (id: string) => (await store.read(Aggregates.workflow, id)).events.map((e) => decode(e)!.type.split(".")[2]);
  const dispatchedSteps = () => queue.published.map((p) => p.data.step);
  /** The store with the outbox's durable subscribed through `outbox`; every other subscription as it is. */
  const withOutbox = (outbox: EventStore["subscribe"]): EventStore => new Proxy(store, {
    get(target, key, receiver) {
      if (key !== "subscribe") return Reflect.get(target, key, receiver) as unknown;
      return (options: Parameters<EventStore["subscribe"]>[0], handler: Parameters<EventStore["subscribe"]>[1]) =>
        (options.durable === "scheduler-outbox" ? outbox(options, handler) : target.subscribe(options, handler));
    },
  });

  it("brings an outbox consumer made before the max_deliver fix (40, a 60 s ack wait) to the declared config at start, and dispatches through it", async () => {
    const jsm = await jetstreamManager(nc);
    const durable = `${prefix}_scheduler-outbox`;
    await jsm.consumers.add(`${prefix}_events`, {
      durable_name: durable, ack_policy: AckPolicy.Explicit, ack_wait: 60_000_000_000, max_deliver: 40,
      filter_subject: `${prefix}.ev.${Aggregates.workflow}.>`, deliver_policy: DeliverPolicy.All,
    });
    await startScheduler();
    // The outbox's subscription opens its consumer right after start, without holding it up.
    const declared = async () => {
      const { config } = await jsm.consumers.info(`${prefix}_events`, durable);
      return config.max_deliver === -1 && config.ack_wait === 30_000_000_000;
    };
    await waitFor(declared, { what: "the outbox consumer with max_deliver -1 and a 30 s ack wait" });
    // The publish right after the decision fails: the dispatch can come from the outbox only.
    queue.setAvailable(false);
    await createSandbox();
    await waitFor(async () => (await workflowTypes("rk1.db.create")).includes("step_dispatched"), { what: "the recorded dispatch" });
    queue.setAvailable(true);
    await waitFor(() => queue.published.length === 1, { timeoutMs: 15_000, what: "the root step dispatched by the outbox" });
    expect(queue.published[0]).toMatchObject({ cluster: "c1", id: "rk1.db.create.a.1" });
  });

  it("refuses to start on a stored event its projections cannot fold, naming it, instead of skipping it", async () => {
    // A workflow event whose data is not an object: its codec cannot read it.
    const bad = await store.append(Aggregates.workflow, "rk9.db.create", NO_AGGREGATE, [{ type: "ephemera.workflow.started.v1", data: null }], { source: "test" });
    const starting = startScheduler();
    await expect(starting).rejects.toBeInstanceOf(ProjectionFaultError);
    await expect(starting).rejects.toMatchObject({ subject: "rk9.db.create", position: bad.revision, type: "ephemera.workflow.started.v1" });
    expect(scheduler.health.healthy).toBe(false);
  });

  it("dispatches roots to the sandbox's cluster, fans out on success, and ends the workflow", async () => {
    await startScheduler();
    await createSandbox();
    await waitFor(() => queue.published.length === 1, { what: "root dispatch" });
    const [first] = queue.published;
    // A workflow's first step waits in the start lane; the later ones go ahead of new workflows'.
    expect(first).toMatchObject({ cluster: "c1", id: "rk1.db.create.a.1", lane: "start" });
    expect(first!.data).toMatchObject({ sandbox: "sb", routingKey: "rk1", resource: "db", phase: "create", step: "a", plugin: "db", version: "1.0.0" });
    expect(first!.data.runner?.image).toBe("debian:bookworm-slim");
    // What the run may do, and where its files are (the Kubernetes driver shares their directories).
    expect(first!.data).toMatchObject({ inputs: [], outputs: ["x"], inputPaths: [], outputPaths: ["/tmp/x"] });

    await finish(first!.data);
    await waitFor(() => queue.published.length === 3, { what: "fan-out" });
    expect(dispatchedSteps().slice(1).sort()).toEqual(["b", "c"]);
    expect(queue.published.slice(1).map((p) => p.lane)).toEqual(["next", "next"]);
    for (const p of queue.published.slice(1)) await finish(p.data);
    await waitFor(async () => (await workflowTypes("rk1.db.create")).includes("succeeded"), { what: "workflow success" });
    const wf = (await store.read(Aggregates.workflow, "rk1.db.create")).events.map(decode);
    // A step's success names its outputs' digests, as the run journaled them: the IO context needs not read the run.
    expect(wf).toContainEqual(ev("ephemera.workflow.step_succeeded.v1", {
      step: "a", runId: "rk1.db.create.a.1", outputs: [{ key: "x", size: 2, sha256: X_JOURNALED.sha256 }],
    }));
    expect(wf.at(-1)).toEqual(ev("ephemera.workflow.succeeded.v1", { outputs: [{ key: "a.x", size: 2 }] }));
  });

  it("deprovisioning waits for a running create workflow to be cancelled, then runs the delete steps", async () => {
    await startScheduler();
    await createSandbox();
    await waitFor(() => queue.published.length === 1, { what: "root dispatch" });
    const a = queue.published[0]!.data;
    await append(Aggregates.steprun, a.runId, [ev("ephemera.steprun.started.v1", { runId: a.runId, workflowId: a.workflowId, step: a.step, attempt: 1, runner: "r1" })]);
    await waitFor(async () => (await workflowTypes("rk1.db.create")).includes("step_started"), { what: "the step to be running" });
    await append(Aggregates.sandbox, "sb", [
      ev("ephemera.sandbox.deleting.v1", {}),
      ev("ephemera.sandbox.resource_deprovision_requested.v1", { sandbox: "sb", routingKey: "rk1", cluster: "c1", resource }),
    ]);
    await waitFor(() => queue.cancels.length === 1, { what: "cancel broadcast" });
    expect(queue.cancels[0]).toMatchObject({ cluster: "c1", body: { runIds: ["rk1.db.create.a.1"], reason: "sandbox deleted" } });
    expect(await store.read(Aggregates.workflow, workflowId("rk1", "db", "delete"))).toMatchObject({ version: 0 });

    await finish(queue.published[0]!.data, false);
    await waitFor(() => dispatchedSteps().includes("z"), { what: "delete step dispatch" });
    expect(await workflowTypes("rk1.db.create")).toEqual(["started", "step_dispatched", "step_started", "cancel_requested", "step_failed", "cancelled"]);
    const del = (await store.read(Aggregates.workflow, "rk1.db.delete")).events.map(decode)[0];
    expect(del?.data).toMatchObject({ phase: "delete", createWorkflowId: "rk1.db.create", params: { p: "v" } });
  });

  describe("a run's start, recorded only once it has run for a while", () => {
    const started = (d: pb.StepDispatch) => append(Aggregates.steprun, d.runId, [ev("ephemera.steprun.started.v1", {
      runId: d.runId, workflowId: d.workflowId, step: d.step, attempt: d.attempt, runner: "r1",
    })]);
    const succeeded = (d: pb.StepDispatch) => append(Aggregates.steprun, d.runId, [ev("ephemera.steprun.succeeded.v1", {
      runId: d.runId, workflowId: d.workflowId, step: d.step, outputs: d.step === "a" ? [X_JOURNALED] : [],
    })]);
    /** A scheduler with this delay, a sandbox, and its root step's run started and the start put off: that run's dispatch. */
    const rootStartPutOff = async (startRecordDelayMs: number) => {
      await startScheduler({ startRecordDelayMs });
      await createSandbox();
      await waitFor(() => queue.published.length === 1, { what: "root dispatch" });
      const a = queue.published[0]!.data;
      await started(a);
      await waitFor(() => scheduler.startsPutOffOf(a.workflowId).includes(a.runId), { what: "the start put off" });
      return a;
    };

    it("is recorded with the result, in its commit and at the time the run started, for a run that ended sooner", async () => {
      const a = await rootStartPutOff(60_000);
      await succeeded(a);
      await waitFor(() => queue.published.length === 3, { what: "fan-out" });
      const wf = (await store.read(Aggregates.workflow, "rk1.db.create")).events;
      expect(wf.map((e) => decode(e)!.type.split(".")[2])).toEqual(["started", "step_dispatched", "step_started", "step_succeeded", "step_dispatched", "step_dispatched"]);
      // One commit fewer: the start went in with the result.
      expect(wf[2]!.position).toBe(wf[3]!.position);
      const runStart = (await store.read(Aggregates.steprun, a.runId)).events[0]!;
      expect(decode(wf[2]!)?.data).toEqual({ step: "a", runId: a.runId, runner: "r1", startedAt: runStart.time });
      expect(scheduler.startsPutOffOf(a.workflowId)).toEqual([]);
    });

    it("comes from the run's own events when the scheduler that put it off stopped before the result came", async () => {
      const a = await rootStartPutOff(60_000);
      await scheduler.stop();
      await startScheduler({ startRecordDelayMs: 60_000 });
      await succeeded(a);
      await waitFor(() => queue.published.length === 3, { what: "fan-out" });
      const wf = (await store.read(Aggregates.workflow, "rk1.db.create")).events;
      const runStart = (await store.read(Aggregates.steprun, a.runId)).events[0]!;
      expect(wf.map((e) => decode(e)!.type.split(".")[2]).slice(0, 4)).toEqual(["started", "step_dispatched", "step_started", "step_succeeded"]);
      expect(decode(wf[2]!)?.data).toMatchObject({ runner: "r1", startedAt: runStart.time });
    });

    it("is recorded once the run has run for the delay", async () => {
      const a = await rootStartPutOff(200);
      await waitFor(async () => (await workflowTypes("rk1.db.create")).includes("step_started"), { what: "the start recorded" });
      expect(await workflowTypes("rk1.db.create")).toEqual(["started", "step_dispatched", "step_started"]);
      expect(scheduler.startsPutOffOf(a.workflowId)).toEqual([]);
    });

    it("is recorded before a cancel, so the workflow still waits for the running step before it is cancelled", async () => {
      const a = await rootStartPutOff(60_000);
      await append(Aggregates.sandbox, "sb", [
        ev("ephemera.sandbox.deleting.v1", {}),
        ev("ephemera.sandbox.resource_deprovision_requested.v1", { sandbox: "sb", routingKey: "rk1", cluster: "c1", resource }),
      ]);
      await waitFor(() => queue.cancels.length === 1, { what: "cancel broadcast" });
      expect(queue.cancels[0]).toMatchObject({ cluster: "c1", body: { runIds: [a.runId] } });
      expect(await workflowTypes("rk1.db.create")).toEqual(["started", "step_dispatched", "step_started", "cancel_requested"]);
      expect(await store.read(Aggregates.workflow, workflowId("rk1", "db", "delete"))).toMatchObject({ version: 0 });
    });

    it("is forgotten here once another replica recorded it", async () => {
      const a = await rootStartPutOff(60_000);
      await append(Aggregates.workflow, a.workflowId, [ev("ephemera.workflow.step_started.v1", { step: a.step, runId: a.runId, runner: "r1" })]);
      await waitFor(() => scheduler.startsPutOffOf(a.workflowId).length === 0, { what: "the start put off forgotten" });
    });

    it("is not lost when the scheduler that put it off stops: the next one records it", async () => {
      const a = await rootStartPutOff(300);
      await scheduler.stop();
      await startScheduler({ startRecordDelayMs: 300 });
      await waitFor(async () => (await workflowTypes("rk1.db.create")).includes("step_started"), { timeoutMs: 10_000, what: "the start recorded by the next scheduler" });
      expect(await workflowTypes("rk1.db.create")).toEqual(["started", "step_dispatched", "step_started"]);
      expect(decode((await store.read(Aggregates.workflow, "rk1.db.create")).events[2]!)?.data).toMatchObject({ runId: a.runId, runner: "r1" });
    });
  });

  it("publishes a dispatch right after its decision's append, without the outbox, with the lane, capability and timeout it would give", async () => {
    // The barrier: the outbox's consumer never delivers, so whatever is published was published at once.
    const outboxHeld: string[] = [];
    const held = withOutbox((options) => {
      outboxHeld.push(options.durable);
      return { stop: async () => undefined, caughtUp: Promise.resolve() };
    });
    scheduler = new Scheduler({ store: held, queue, logger: createLogger("test", "silent") });
    await scheduler.start();
    expect(outboxHeld).toEqual(["scheduler-outbox"]);
    await createSandbox();
    await waitFor(() => queue.published.length === 1, { what: "the root step dispatched at once" });
    expect(queue.published[0]).toMatchObject({ cluster: "c1", id: "rk1.db.create.a.1", lane: "start" });
    expect(queue.published[0]!.data).toMatchObject({ runId: "rk1.db.create.a.1", step: "a", plugin: "db", version: "1.0.0", outputs: ["x"], outputPaths: ["/tmp/x"] });
    // a's success: b and c, each in the lane of a later step.
    await finish(queue.published[0]!.data);
    await waitFor(() => queue.published.length === 3, { what: "b and c dispatched at once" });
    expect(queue.published.slice(1).map((p) => [p.data.step, p.lane]).sort()).toEqual([["b", "next"], ["c", "next"]]);
  });

  it("publishes a dispatch once when the outbox meets its commit while the publish right after the append is still on its way", async () => {
    // The barrier: the first publish of each dispatch is held until the outbox has begun handling the commit that decided it.
    const outboxMet = new Map<string, () => void>();
    const metBefore = new Set<string>();
    const met = (runId: string) => (metBefore.has(runId) ? Promise.resolve() : new Promise<void>((resolve) => outboxMet.set(runId, resolve)));
    const handled: number[] = [];
    const held = withOutbox((options, handler) => store.subscribe(options, async (commit) => {
      for (const r of commit.events) {
        const e = decode(r);
        if (e?.type !== "ephemera.workflow.step_dispatched.v1") continue;
        metBefore.add(e.data.runId);
        outboxMet.get(e.data.runId)?.();
      }
      await handler(commit);
      handled.push(commit.position);
    }));
    const publishes: string[] = [];
    const heldFirst = new Set<string>();
    const counting = new Proxy(queue, {
      get(target, key, receiver) {
        if (key !== "publish") return Reflect.get(target, key, receiver) as unknown;
        return async (...args: Parameters<typeof queue.publish>) => {
          const id = args[1];
          publishes.push(id);
          if (!heldFirst.has(id)) {
            heldFirst.add(id);
            await met(id);
          }
          return target.publish(...args);
        };
      },
    });
    scheduler = new Scheduler({ store: held, queue: counting, logger: createLogger("test", "silent") });
    await scheduler.start();
    await createSandbox();
    await waitFor(() => queue.published.length === 1, { what: "the root step dispatched" });
    const position = (await store.read(Aggregates.workflow, "rk1.db.create")).revision;
    await waitFor(() => handled.includes(position), { what: "the outbox done with the commit that dispatched it" });
    expect(publishes).toEqual(["rk1.db.create.a.1"]);
  });

  it("publishes a dispatch whose first publish failed once the queue is back (outbox), and only once", async () => {
    queue.setAvailable(false);
    await startScheduler();
    await createSandbox();
    // Decided and recorded, but the publish fails: nothing is lost, the outbox keeps trying.
    await waitFor(async () => (await workflowTypes("rk1.db.create")).includes("step_dispatched"), { what: "the recorded dispatch" });
    expect(queue.published).toHaveLength(0);
    queue.setAvailable(true);
    await waitFor(() => queue.published.length === 1, { timeoutMs: 15_000, what: "the dispatch after the queue came back" });
    expect(queue.published.map((p) => p.id)).toEqual(["rk1.db.create.a.1"]);
  });

  it("after a restart, reacts to what happened while down and never publishes a dispatch twice", async () => {
    await startScheduler();
    await createSandbox();
    await waitFor(() => queue.published.length === 1, { what: "root dispatch" });
    await scheduler.stop();

    // While the scheduler is down: a's result arrives.
    await finish(queue.published[0]!.data);
    await startScheduler();
    await waitFor(() => queue.published.length === 3, { what: "b and c dispatched after restart" });
    expect(dispatchedSteps().sort()).toEqual(["a", "b", "c"]);

    // Restarting again with b and c dispatched but not started: the outbox acknowledged them,
    // so nothing is published again. A second sandbox's dispatch, published after, is the barrier.
    await scheduler.stop();
    await startScheduler();
    await append(Aggregates.sandbox, "sb2", [
      ev("ephemera.sandbox.created.v1", { name: "sb2", routingKey: "rk2", spec: { cluster: "c1" }, resources: [resource] }),
      ev("ephemera.sandbox.resource_provision_requested.v1", { sandbox: "sb2", routingKey: "rk2", cluster: "c1", resource }),
    ]);
    await waitFor(() => queue.published.some((p) => p.id === "rk2.db.create.a.1"), { what: "the second sandbox's dispatch" });
    const ids = queue.published.map((p) => p.id);
    expect(ids).toHaveLength(4);
    expect(new Set(ids).size).toBe(4);
  });
  it("runs a failed step again after its backoff when its retries allow, as a new attempt", async () => {
    const retrying = pb.ResourcePluginSpec.fromPartial({ ...spec, create: [{ name: "a", retries: 1 }] });
    await store.append(Aggregates.plugin, "flaky", NO_AGGREGATE,
      [encode(ev("ephemera.plugin.published.v1", { name: "flaky", version: "1.0.0", spec: retrying, digest: "f" }))], { source: "test" });
    await startScheduler();
    const flaky = { name: "db", plugin: "flaky", version: "1.0.0", params: {} };
    await append(Aggregates.sandbox, "sb", [
      ev("ephemera.sandbox.created.v1", { name: "sb", routingKey: "rk1", spec: { cluster: "c1" }, resources: [flaky] }),
      ev("ephemera.sandbox.resource_provision_requested.v1", { sandbox: "sb", routingKey: "rk1", cluster: "c1", resource: flaky }),
    ]);
    await waitFor(() => queue.published.length === 1, { what: "attempt 1" });
    await finish(queue.published[0]!.data, false);
    // The retry is a durable timer: about a second later attempt 2 goes out, under its own run id.
    await waitFor(() => queue.published.length === 2, { timeoutMs: 10_000, what: "attempt 2 after the backoff" });
    expect(queue.published.map((p) => p.id)).toEqual(["rk1.db.create.a.1", "rk1.db.create.a.2"]);
    expect(await workflowTypes("rk1.db.create")).toEqual(["started", "step_dispatched", "step_started", "step_retry_scheduled", "step_dispatched"]);
    await finish(queue.published[1]!.data, false);
    await waitFor(async () => (await workflowTypes("rk1.db.create")).at(-1) === "failed", { what: "the workflow to fail after its last attempt" });
  });

  it("reports a run no runner takes, and deletes the sandbox without a runner", async () => {
    await startScheduler({ unclaimedAfterMs: 300 });
    await createSandbox();
    await waitFor(async () => (await workflowTypes("rk1.db.create")).includes("step_unclaimed"), { what: "the unclaimed report" });
    const unclaimed = (await store.read(Aggregates.workflow, "rk1.db.create")).events.map(decode).find((e) => e?.type === "ephemera.workflow.step_unclaimed.v1");
    expect(unclaimed?.data).toMatchObject({ step: "a", runId: "rk1.db.create.a.1", cluster: "c1" });
    await append(Aggregates.sandbox, "sb", [
      ev("ephemera.sandbox.deleting.v1", {}),
      ev("ephemera.sandbox.resource_deprovision_requested.v1", { sandbox: "sb", routingKey: "rk1", cluster: "c1", resource }),
    ]);
    // Nothing ever started: the queued step is cancelled at once and the delete workflow has nothing to undo.
    await waitFor(async () => (await workflowTypes("rk1.db.delete")).at(-1) === "succeeded", { what: "the delete workflow to end" });
    expect(await workflowTypes("rk1.db.create")).toEqual(["started", "step_dispatched", "step_unclaimed", "cancel_requested", "cancelled"]);
    const del = (await store.read(Aggregates.workflow, "rk1.db.delete")).events.map(decode)[0];
    expect(del?.data).toMatchObject({ steps: [], skippedReason: expect.stringContaining("no create step ever started") });
    expect(queue.cancels[0]).toMatchObject({ cluster: "c1", body: { runIds: ["rk1.db.create.a.1"] } });
  });

  it("fires the workflow timers in the replica holding the timers' lease only, and in the other once it is handed over", async () => {
    const fire = jest.spyOn(Scheduler.prototype as unknown as { fireTimers: (ids: string[], now: number) => Promise<void> }, "fireTimers");
    const firedBy = (id: string) => new Set(fire.mock.contexts.filter((_, i) => fire.mock.calls[i]![0].includes(id)));
    const nc2 = await connectNats("nats://127.0.0.1:4222", "scheduler-test-2");
    const leases = await JetStreamLeaseStore.open(nc, prefix);
    const replica = (s: EventStore) => new Scheduler({ store: s, queue, leases, leaseTtlMs: 600, logger: createLogger("test", "silent"), policy: { unclaimedAfterMs: 300 } });
    const a = replica(store);
    const b = replica(await JetStreamEventStore.open(nc2, { prefix }));
    try {
      await a.start();
      await waitFor(() => a.firesTimers, { what: "A to hold the timers' lease" });
      await b.start();
      await createSandbox();
      await waitFor(async () => (await workflowTypes("rk1.db.create")).includes("step_unclaimed"), { what: "the unclaimed report" });
      expect(firedBy("rk1.db.create")).toEqual(new Set([a]));
      expect(b.firesTimers).toBe(false);
      // A goes away: B takes the lease and fires the next sandbox's timer.
      await a.stop();
      await waitFor(() => b.firesTimers, { what: "B to take the timers' lease" });
      const other = { ...resource, name: "cache" };
      await append(Aggregates.sandbox, "sb2", [
        ev("ephemera.sandbox.created.v1", { name: "sb2", routingKey: "rk2", spec: { cluster: "c1" }, resources: [other] }),
        ev("ephemera.sandbox.resource_provision_requested.v1", { sandbox: "sb2", routingKey: "rk2", cluster: "c1", resource: other }),
      ]);
      await waitFor(async () => (await workflowTypes("rk2.cache.create")).includes("step_unclaimed"), { what: "the second unclaimed report" });
      expect(firedBy("rk2.cache.create")).toEqual(new Set([b]));
    } finally {
      await a.stop();
      await b.stop();
      fire.mockRestore();
      await nc2.close();
    }
  });

  it("fails a workflow at once, with a reason, when its plugin version is missing", async () => {
    await startScheduler();
    const ghost = { name: "db", plugin: "ghost", version: "9.9.9", params: {} };
    await append(Aggregates.sandbox, "sb", [
      ev("ephemera.sandbox.created.v1", { name: "sb", routingKey: "rk1", spec: { cluster: "c1" }, resources: [ghost] }),
      ev("ephemera.sandbox.resource_provision_requested.v1", { sandbox: "sb", routingKey: "rk1", cluster: "c1", resource: ghost }),
    ]);
    await waitFor(async () => (await workflowTypes("rk1.db.create")).at(-1) === "failed", { what: "the workflow to fail" });
    const failed = (await store.read(Aggregates.workflow, "rk1.db.create")).events.map(decode).at(-1);
    expect(failed?.data).toMatchObject({ failure: { reason: "PluginVersionMissing", message: expect.stringContaining("ghost@9.9.9") } });
    expect(queue.published).toHaveLength(0);
  });
  it("carries the correlation of the sandbox's events through its workflow events and dispatches", async () => {
    await startScheduler();
    const cur = await store.read(Aggregates.sandbox, "sb");
    const appended = await store.append(Aggregates.sandbox, "sb", cur, [
      ev("ephemera.sandbox.created.v1", { name: "sb", routingKey: "rk1", spec: { cluster: "c1" }, resources: [resource] }),
      ev("ephemera.sandbox.resource_provision_requested.v1", { sandbox: "sb", routingKey: "rk1", cluster: "c1", resource }),
    ].map(encode), { source: "sandbox", correlationId: "call-42", actor: "alice" });
    await waitFor(() => queue.published.length === 1, { what: "root dispatch" });
    const wf = (await store.read(Aggregates.workflow, "rk1.db.create")).events;
    expect(wf.map((e) => e.correlationId)).toEqual(wf.map(() => "call-42"));
    expect(wf[0]!.causationId).toBe(appended.events[0]!.id);
    const dispatch = queue.published[0]!.data;
    expect(dispatch.correlationId).toBe("call-42");
    expect(dispatch.causationId).toBe(wf.find((e) => e.type === "ephemera.workflow.step_dispatched.v1")!.id);
  });
});
