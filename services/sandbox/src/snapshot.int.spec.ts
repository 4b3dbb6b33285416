// The sandbox service on JetStream, restarted on a history of deleted sandboxes: it restores
// its snapshot, follows the stream from its position, holds only what is live, ends where a
// full replay does, and still reads a deleted sandbox's logs from the store.
import type { NatsConnection } from "@nats-io/nats-core";
import { Aggregates, encode, ev, workflowId, type DomainEvent } from "@ephemera/events";
import {
  InMemoryLogStore, InMemoryValueStore, JetStreamEventStore, JetStreamSnapshotStore, connectNats, type Projection,
} from "@ephemera/eventstore";
import { NotFoundError, createLogger, waitFor } from "@ephemera/kit";
import { SandboxCore } from "./service.js";
import { NATS_URL, testNats } from "../../../test/support/servers.js";

const logger = createLogger("sandbox", "silent");
const sorted = <S>(p: Projection<S>) => [...p.entries()].sort(([a], [b]) => a.localeCompare(b));

describe("sandbox service restarted on a history of deleted sandboxes", () => {
  let nc: NatsConnection;
  let store: JetStreamEventStore;
  let snapshots: JetStreamSnapshotStore;
  let cleanup: (nc: NatsConnection) => Promise<void>;
  const cores: SandboxCore[] = [];
  let keys = 0;

  beforeEach(async () => {
    const t = testNats("sbsnap");
    cleanup = t.cleanup;
    nc = await connectNats(NATS_URL, "sandbox-snapshot");
    store = await JetStreamEventStore.open(nc, { prefix: t.prefix });
    snapshots = await JetStreamSnapshotStore.open(nc, t.prefix);
  });
  afterEach(async () => {
    for (const core of cores.splice(0)) await core.stop();
    await store.close();
    await cleanup(nc);
    await nc.close();
  });

  const core = (withSnapshots: boolean) => {
    const c = new SandboxCore({
      store, logs: new InMemoryLogStore(), values: new InMemoryValueStore(), logger, previewDomain: "preview.test",
      routingKey: () => `rk${++keys}`, ...(withSnapshots ? { snapshots: { store: snapshots, fingerprint: "code-1" } } : {}),
    });
    cores.push(c);
    return c;
  };
  const append = async (aggregate: string, id: string, ...events: DomainEvent[]) => {
    const current = await store.read(aggregate, id);
    await store.append(aggregate, id, current, events.map(encode), { source: "test" });
  };
  /** A sandbox of one resource whose create workflow ran its one step: the service records it ready. */
  const readySandbox = async (c: SandboxCore, name: string) => {
    const routingKey = `rk-${name}`;
    const resource = { name: "db", plugin: "p", version: "1.0.0", params: {} };
    await append(Aggregates.sandbox, name, ev("ephemera.sandbox.created.v1", { name, routingKey, resources: [resource] }),
      ev("ephemera.sandbox.resource_provision_requested.v1", { sandbox: name, routingKey, resource }));
    const wf = workflowId(routingKey, "db", "create");
    const runId = `${wf}.a.1`;
    await append(Aggregates.workflow, wf,
      ev("ephemera.workflow.started.v1", { workflowId: wf, sandbox: name, routingKey, resource: "db", phase: "create", steps: [{ name: "a" }] }),
      ev("ephemera.workflow.step_dispatched.v1", { step: "a", runId, attempt: 1 }),
      ev("ephemera.workflow.step_started.v1", { step: "a", runId, runner: "r1" }),
      ev("ephemera.workflow.step_succeeded.v1", { step: "a", runId }),
      ev("ephemera.workflow.succeeded.v1", {}));
    await waitFor(() => {
      const state = c.sandboxes.get(name)?.state;
      return state?.status === "active" && state.ready;
    }, { what: `${name} ready` });
  };

  it("restores its snapshot, follows from its position, holds no deleted sandbox, and equals a full replay", async () => {
    const first = core(true);
    await first.start();
    expect(first.feed.startedFrom).toBe(0);
    for (let i = 0; i < 8; i++) await readySandbox(first, `sb${i}`);
    for (let i = 0; i < 6; i++) await first.deleteSandbox(`sb${i}`, true);
    await waitFor(async () => first.feed.position >= (await store.position()), { what: "the feed at the end" });
    expect({ sandboxes: first.sandboxes.size, workflows: first.workflows.size }).toEqual({ sandboxes: 2, workflows: 2 });
    await first.stop();
    cores.splice(cores.indexOf(first), 1);
    const stoppedAt = first.feed.position;

    const late = core(false);
    await late.start();
    await readySandbox(late, "late");
    await late.stop();
    cores.splice(cores.indexOf(late), 1);

    const restarted = core(true);
    await restarted.start();
    const replayed = new SandboxCore({
      store, logs: new InMemoryLogStore(), values: new InMemoryValueStore(), logger, previewDomain: "preview.test", routingKey: () => "unused",
    });
    await replayed.feed.start();
    expect(restarted.feed.startedFrom).toBe(stoppedAt);
    expect(restarted.feed.startedFrom).toBeGreaterThan(0);
    expect(restarted.feed.position).toBe(await store.position());
    expect({ sandboxes: [...restarted.sandboxes.entries()].map(([n]) => n).sort(), workflows: restarted.workflows.size, forks: restarted.forks.size })
      .toEqual({ sandboxes: ["late", "sb6", "sb7"], workflows: 3, forks: 0 });
    for (const pick of [(c: SandboxCore) => c.sandboxes, (c: SandboxCore) => c.workflows, (c: SandboxCore) => c.plugins] as const) {
      expect(sorted<unknown>(pick(restarted) as Projection<unknown>)).toEqual(sorted<unknown>(pick(replayed) as Projection<unknown>));
    }
    await replayed.feed.stop();

    // A deleted sandbox is not found, yet its logs are read from the store.
    await expect(restarted.view("sb0", false)).rejects.toBeInstanceOf(NotFoundError);
    const selection = await restarted.logRuns("sb0", "db", {});
    expect(selection).toEqual({ runs: [{ step: "a", phase: "create", attempt: 1, runId: `${workflowId("rk-sb0", "db", "create")}.a.1`, ended: true }], more: false });
    expect(restarted.runEnded(`${workflowId("rk-sb0", "db", "create")}.a.1`)).toBe(true);
  });
});
