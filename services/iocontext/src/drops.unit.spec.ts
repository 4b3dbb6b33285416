// The drop ledger folded from a stream: which deleted sandboxes are due, and the journal
// keys each drop addresses.
import { Aggregates, encode, ev } from "@ephemera/events";
import { Feed, InMemoryEventStore, InMemoryValueStore, NO_AGGREGATE } from "@ephemera/eventstore";
import { DropLedger, type DueDrop } from "./drops.js";
import { history, sandboxOf } from "./drops.testkit.js";
import { InMemoryOutputStore } from "./outputs.memory.js";
import { projections as makeProjections } from "./state.js";

describe("DropLedger", () => {
  const setup = () => {
    const store = new InMemoryEventStore();
    const h = history(store, new InMemoryValueStore(), new InMemoryOutputStore());
    const projections = makeProjections();
    const ledger = new DropLedger();
    const made: DueDrop[] = [];
    const feed = new Feed(store, [projections.plugins, projections.workflows, projections.sandboxes]);
    feed.onCommit((c) => { const due = ledger.observe(c, projections); if (due) made.push(due); });
    return { store, h, ledger, made, feed };
  };
  const recordDropped = (store: InMemoryEventStore, routingKey: string) =>
    store.append(Aggregates.outputs, routingKey, NO_AGGREGATE, [encode(ev("ephemera.outputs.dropped.v1", {}))], { source: "test" });

  it("makes a deleted sandbox due with every output its steps declare, for every attempt dispatched; its record settles it", async () => {
    const { store, h, ledger, made, feed } = setup();
    const a = sandboxOf("a", "rka");
    const b = sandboxOf("b", "rkb");
    await h.publishPlugin();
    await h.create(a);
    await h.create(b);
    await h.delete(a);
    await feed.start();
    expect(made).toEqual([{ routingKey: "rka", sandbox: "a", keys: a.addressed }]);
    expect(ledger.pending()).toEqual(made);
    await recordDropped(store, "rka");
    await feed.waitFor(await store.position());
    expect(ledger.pending()).toEqual([]);
    await feed.stop();
  });

  it("drops the values of a run that ended after its sandbox was dropped, never making it due at a start", async () => {
    const { store, h, ledger, made, feed } = setup();
    const a = sandboxOf("a", "rka");
    await h.publishPlugin();
    await h.create(a);
    await h.delete(a);
    const late = (run: string) => h.append(Aggregates.steprun, run,
      ev("ephemera.steprun.succeeded.v1", { runId: run, step: "seed", outputs: [{ name: "marker", size: 1, sha256: "00" }] }));
    // While its drop is due, the drop to come covers the run.
    await late(a.seed1);
    await recordDropped(store, "rka");
    await late(a.provision2);
    await feed.start();
    expect(made).toEqual([
      { routingKey: "rka", sandbox: "a", keys: a.addressed },
      { routingKey: "rka", sandbox: "", keys: [`${a.provision2}/marker`], late: true },
    ]);
    expect(ledger.pending()).toEqual([]);
    await feed.stop();
  });

  it("names no keys when the plugin version's spec is unknown (the drop then lists the journal)", async () => {
    const { h, made, feed } = setup();
    const a = sandboxOf("a", "rka");
    await h.create(a);
    await h.delete(a);
    await feed.start();
    expect(made).toEqual([{ routingKey: "rka", sandbox: "a", keys: undefined }]);
    await feed.stop();
  });

  it("makes a sandbox deleted before any workflow ran due with no keys", async () => {
    const { h, made, feed } = setup();
    await h.append(Aggregates.sandbox, "c", ev("ephemera.sandbox.created.v1", { name: "c", routingKey: "rkc" }));
    await h.append(Aggregates.sandbox, "c", ev("ephemera.sandbox.deleted.v1", {}));
    await feed.start();
    expect(made).toEqual([{ routingKey: "rkc", sandbox: "c", keys: [] }]);
    await feed.stop();
  });
});
