// Two replicas of the sandbox service's core on one store: what one wrote is read through
// the other, a plugin version is never removed under a sandbox that landed on it however
// the two interleave, and the TTL timers fire in one replica at a time.
import * as pb from "@ephemera/proto";
import {
  InMemoryEventStore, InMemoryLeaseStore, InMemoryLogStore, InMemoryValueStore, JetStreamEventStore, JetStreamLeaseStore, connectNats,
  type Commit, type CommitHandler, type EventStore, type LeaseStore, type NewEvent,
} from "@ephemera/eventstore";
import { ValidationError, createLogger, waitFor } from "@ephemera/kit";
import { Aggregates } from "@ephemera/events";
import type { NatsConnection } from "@nats-io/nats-core";
import { testNats } from "../../../test/support/servers.js";
import { SandboxCore } from "./service.js";
import { SandboxTimers } from "./core/timers.js";

const logger = createLogger("sandbox", "silent");

/**
 * A store whose appends can be held at gates: each append matching a gate waits there
 * (`reached` resolves when the first arrives) until `release()`; its feed can be held back too.
 */
function gated(store: EventStore) {
  const gates: Array<{ match: (aggregate: string, events: NewEvent[]) => boolean; arrive: () => void; opened: Promise<void> }> = [];
  let heldFeed: Promise<void> | undefined;
  let silent = false;
  const wrapped: EventStore = {
    get duplicateWindowMs() { return store.duplicateWindowMs; },
    append: async (aggregate, id, expected, events, meta) => {
      for (const g of gates.filter((x) => x.match(aggregate, events))) {
        g.arrive();
        await g.opened;
      }
      return store.append(aggregate, id, expected, events, meta);
    },
    read: (aggregate, id) => store.read(aggregate, id),
    // Silenced: the position is never said, as by a NATS server paused or cut off.
    position: () => (silent ? new Promise<number>(() => undefined) : store.position()),
    follow: (options, handler: CommitHandler) => store.follow(options, async (c: Commit) => {
      if (heldFeed) await heldFeed;
      return handler(c);
    }),
    subscribe: (options, handler) => store.subscribe(options, handler),
    close: () => store.close(),
  };
  return {
    store: wrapped,
    gate(match: (aggregate: string, events: NewEvent[]) => boolean) {
      let arrive!: () => void;
      let release!: () => void;
      const reached = new Promise<void>((r) => (arrive = r));
      const gate = { match, arrive, opened: new Promise<void>((r) => (release = r)) };
      gates.push(gate);
      return { reached, release: () => { gates.splice(gates.indexOf(gate), 1); release(); } };
    },
    /** From now on the store never says its position. */
    silencePosition() { silent = true; },
    /** Holds the feed: commits reach the projections once the returned function is called. */
    holdFeed() {
      let deliver!: () => void;
      heldFeed = new Promise<void>((r) => (deliver = () => { heldFeed = undefined; r(); }));
      return deliver;
    },
  };
}

const plugin = (name: string) => pb.ResourcePlugin.fromPartial({
  name,
  spec: { description: "a database", runner: { image: "alpine:3" }, create: [{ name: "provision", script: "#!/bin/sh\n" }] },
});
const sandbox = (name: string, ref: string, ttl?: string) => pb.Sandbox.fromPartial({
  name, spec: { cluster: "local", resources: [{ name: "db", plugin: ref }], ...(ttl ? { ttl: { duration: ttl } } : {}) },
});
const isType = (type: string) => (_: string, events: NewEvent[]) => events.some((e) => e.type === type);

interface Backend {
  /** A handle on the one store, as another process would open it. */
  handle(): Promise<EventStore>;
  leases(): Promise<LeaseStore>;
  dispose(): Promise<void>;
}

const backends: Record<string, () => Promise<Backend>> = {
  "in-memory": async () => {
    const store = new InMemoryEventStore();
    const leases = new InMemoryLeaseStore();
    return { handle: async () => store, leases: async () => leases, dispose: async () => undefined };
  },
  JetStream: async () => {
    const { url, prefix, cleanup } = testNats("sbxr");
    const connections: NatsConnection[] = [];
    const connection = async () => { const nc = await connectNats(url, "sandbox-replicas"); connections.push(nc); return nc; };
    return {
      handle: async () => JetStreamEventStore.open(await connection(), { prefix, logger }),
      leases: async () => JetStreamLeaseStore.open(await connection(), prefix),
      dispose: async () => { await cleanup(connections[0]!); for (const nc of connections) await nc.close(); },
    };
  },
};

describe.each(Object.keys(backends))("two sandbox service replicas on one %s store", (kind) => {
  let backend: Backend;
  const cores: SandboxCore[] = [];
  let keys = 0;
  const replica = async (leaseTtlMs = 10_000) => {
    const g = gated(await backend.handle());
    const core = new SandboxCore({
      store: g.store, leases: await backend.leases(), leaseTtlMs, values: new InMemoryValueStore(), logs: new InMemoryLogStore(), logger,
      previewDomain: "preview.test", routingKey: () => `rk${String(++keys).padStart(4, "0")}`,
    });
    await core.start();
    cores.push(core);
    return { core, ...g };
  };

  beforeEach(async () => { backend = await backends[kind]!(); });
  afterEach(async () => {
    for (const c of cores.splice(0)) await c.stop();
    jest.restoreAllMocks();
    await backend.dispose();
  });

  it("reads through B what was written through A at once, B's feed held back until after the read was asked", async () => {
    const a = await replica();
    const b = await replica();
    await a.core.applyPlugin(plugin("db@1.0.0"));
    const deliver = b.holdFeed();
    await a.core.applySandbox(sandbox("sb", "db"));
    // B has not folded the sandbox in: a read from its projection alone would answer "not found".
    expect(b.core.sandboxes.get("sb")).toBeUndefined();
    const read = b.core.readYourWrites().then(() => b.core.view("sb", false));
    deliver();
    const view = await read;
    expect(view.name).toBe("sb");
    expect(view.resources.map((r) => [r.plugin, r.version])).toEqual([["db", "1.0.0"]]);
    await b.core.readYourWrites();
    expect(b.core.getPlugin("db").version).toBe("1.0.0");
  });

  it("reads what it holds when the store does not say its position (NATS paused or cut off): reads stay up", async () => {
    const a = await replica();
    await a.core.applyPlugin(plugin("db@1.0.0"));
    await a.core.applySandbox(sandbox("sb", "db"));
    a.silencePosition();
    // Without the position's deadline this waits for ever.
    expect(await a.core.readYourWrites()).toBe(a.core.feed.position);
    await expect(a.core.view("sb", false).then((v) => v.name)).resolves.toBe("sb");
  });

  it("undoes an apply that resolved a version whose removal landed before the sandbox did", async () => {
    const a = await replica();
    const b = await replica();
    await a.core.applyPlugin(plugin("db@1.0.0"));
    // The worst point: A resolved db@1.0.0 and is about to append the sandbox.
    const gate = a.gate(isType("ephemera.sandbox.created.v1"));
    const apply = a.core.applySandbox(sandbox("sb", "db@1.0.0"));
    await gate.reached;
    // Meanwhile B deletes the version: no sandbox uses it yet, so it is removed.
    await b.core.deletePlugin("db@1.0.0");
    expect((await b.core.plugins.reload(b.store, "db")).state.versions.has("1.0.0")).toBe(false);
    gate.release();
    const refused = await apply.then(() => undefined, (err: unknown) => err);
    expect(refused).toBeInstanceOf(ValidationError);
    expect((refused as ValidationError).violations).toEqual([expect.objectContaining({ field: "spec.resources[0].plugin", rule: "unknown-plugin" })]);
    // The sandbox that landed is deleted again: none runs on the removed version.
    const events = (await a.store.read(Aggregates.sandbox, "sb")).events.map((e) => e.type);
    expect(events).toEqual(expect.arrayContaining(["ephemera.sandbox.created.v1", "ephemera.sandbox.deleting.v1"]));
    await b.core.readYourWrites();
    expect(b.core.sandboxes.get("sb")?.state.status).not.toBe("active");
  });

  it("keeps a version whose removal was decided before a sandbox landed on it: the removal conflicts and is decided again", async () => {
    const a = await replica();
    const b = await replica();
    await a.core.applyPlugin(plugin("db@1.0.0"));
    // A resolves db@1.0.0 before B marks it deleting, and waits to append the sandbox.
    const applyGate = a.gate(isType("ephemera.sandbox.created.v1"));
    const apply = a.core.applySandbox(sandbox("sb", "db@1.0.0"));
    await applyGate.reached;
    // B decides "unused" (the sandbox is not there yet) and waits to append the removal.
    // (Either replica may react to the deleting mark with a removal of its own: both are held.)
    const removeGate = b.gate(isType("ephemera.plugin.version_deleted.v1"));
    const reactionGate = a.gate(isType("ephemera.plugin.version_deleted.v1"));
    const removal = b.core.deletePlugin("db@1.0.0");
    await removeGate.reached;
    applyGate.release();
    await apply;
    removeGate.release();
    reactionGate.release();
    await removal;
    const db = await b.core.plugins.reload(b.store, "db");
    expect(db.state.versions.get("1.0.0")?.deleting).toBe(true);
    const types = (await b.store.read(Aggregates.plugin, "db")).events.map((e) => e.type);
    expect(types).not.toContain("ephemera.plugin.version_deleted.v1");
    expect(a.core.sandboxes.get("sb")?.state.status).toBe("active");
    // Once its last sandbox is gone, the version goes.
    await a.core.deleteSandbox("sb", true);
    await waitFor(async () => !(await b.core.plugins.reload(b.store, "db")).state.versions.has("1.0.0"), { what: "the version removed" });
  });

  it("fires a TTL in the replica holding the timers' lease only, and in the other once it is handed over", async () => {
    const expire = jest.spyOn(SandboxTimers.prototype as unknown as { expire: (names: string[], now: number) => Promise<void> }, "expire");
    const firedBy = (name: string) => expire.mock.contexts.filter((_, i) => expire.mock.calls[i]![0].includes(name));
    const a = await replica(600);
    await waitFor(() => a.core.firesTimers, { what: "A to hold the timers' lease" });
    const b = await replica(600);
    await a.core.applyPlugin(plugin("db@1.0.0"));
    await a.core.applySandbox(sandbox("first", "db", "2s"));
    await waitFor(async () => { await b.core.readYourWrites(); return b.core.sandboxes.get("first")?.state.status === "deleting"; }, { what: "the first TTL", timeoutMs: 10_000 });
    expect(firedBy("first")).toEqual([a.core.timers]);
    expect(b.core.firesTimers).toBe(false);
    // A goes away: B takes the lease and fires the next TTL.
    await b.core.applySandbox(sandbox("second", "db", "2s"));
    await a.core.stop();
    cores.splice(cores.indexOf(a.core), 1);
    await waitFor(() => b.core.firesTimers, { what: "B to take the timers' lease" });
    await waitFor(async () => { await b.core.readYourWrites(); return b.core.sandboxes.get("second")?.state.status === "deleting"; }, { what: "the second TTL", timeoutMs: 10_000 });
    expect(firedBy("second")).toEqual([b.core.timers]);
  });
});
