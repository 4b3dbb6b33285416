// One contract for every EventStore implementation: the in-memory twin and JetStream
// must behave the same for appends, conflicts, duplicates, reads and subscriptions.
import { ConcurrencyError, waitFor } from "@ephemera/kit";
import { NO_AGGREGATE, type Commit, type EventStore } from "./types.js";
import { Projection, execute } from "./projection.js";

export interface StoreFixture {
  store: EventStore;
  /** A second handle on the same underlying store, as another process would have. */
  reopen(): Promise<EventStore>;
  dispose(): Promise<void>;
}

type Counter = { count: number; log: string[] };
const counter = () =>
  new Projection<Counter>("counter", () => ({ count: 0, log: [] }), (s, e) => {
    const d = e.data as { by: number };
    return { count: s.count + d.by, log: [...s.log, `${e.sequence}:${e.type}`] };
  });
const meta = { source: "test" };

export function eventStoreContract(name: string, setup: () => Promise<StoreFixture>): void {
  describe(`EventStore contract: ${name}`, () => {
    let fx: StoreFixture;
    beforeEach(async () => { fx = await setup(); });
    afterEach(async () => { await fx.dispose(); });

    it("appends a commit of several events and reads them back in order with envelopes", async () => {
      const res = await fx.store.append("counter", "a", NO_AGGREGATE, [
        { type: "ephemera.test.added.v1", data: { by: 1 } },
        { type: "ephemera.test.added.v1", data: { by: 2 } },
      ], { ...meta, correlationId: "corr-1" });
      expect(res.version).toBe(2);
      expect(res.duplicate).toBe(false);
      const read = await fx.store.read("counter", "a");
      expect(read.revision).toBe(res.revision);
      expect(read.version).toBe(2);
      expect(read.events.map((e) => [e.sequence, e.type, e.data, e.subject, e.source, e.correlationId, e.specversion]))
        .toEqual([
          [1, "ephemera.test.added.v1", { by: 1 }, "a", "test", "corr-1", "1.0"],
          [2, "ephemera.test.added.v1", { by: 2 }, "a", "test", "corr-1", "1.0"],
        ]);
      expect(new Set(read.events.map((e) => e.id)).size).toBe(2);
      expect(await fx.store.read("counter", "missing")).toEqual({ events: [], revision: 0, version: 0 });
    });

    it("keeps aggregates apart and accepts dotted ids", async () => {
      await fx.store.append("counter", "x.y.create", NO_AGGREGATE, [{ type: "t", data: { by: 1 } }], meta);
      await fx.store.append("counter", "x.y.delete", NO_AGGREGATE, [{ type: "t", data: { by: 5 } }], meta);
      expect((await fx.store.read("counter", "x.y.create")).events.map((e) => e.data)).toEqual([{ by: 1 }]);
      expect((await fx.store.read("counter", "x.y.delete")).events.map((e) => e.data)).toEqual([{ by: 5 }]);
    });

    it("rejects an append whose expected revision is stale", async () => {
      const first = await fx.store.append("counter", "a", NO_AGGREGATE, [{ type: "t", data: { by: 1 } }], meta);
      await expect(fx.store.append("counter", "a", NO_AGGREGATE, [{ type: "t", data: { by: 1 } }], meta))
        .rejects.toBeInstanceOf(ConcurrencyError);
      await fx.store.append("counter", "a", first, [{ type: "t", data: { by: 1 } }], meta);
      await expect(fx.store.append("counter", "a", first, [{ type: "t", data: { by: 1 } }], meta))
        .rejects.toBeInstanceOf(ConcurrencyError);
      expect((await fx.store.read("counter", "a")).version).toBe(2);
    });

    it("drops a duplicate publish of the same commit id", async () => {
      const a = await fx.store.append("counter", "a", NO_AGGREGATE, [{ type: "t", data: { by: 1 } }], { ...meta, commitId: "c-1" });
      const b = await fx.store.append("counter", "a", NO_AGGREGATE, [{ type: "t", data: { by: 1 } }], { ...meta, commitId: "c-1" });
      expect(b.duplicate).toBe(true);
      expect(b.revision).toBe(a.revision);
      expect((await fx.store.read("counter", "a")).events).toHaveLength(1);
    });

    it("retries conflicting writers so that no increment is lost", async () => {
      const other = await fx.reopen();
      const p1 = counter();
      const p2 = counter();
      const inc = (store: EventStore, p: Projection<Counter>) =>
        execute(store, p, "shared", () => [{ type: "t", data: { by: 1 } }], meta, 50);
      await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? inc(fx.store, p1) : inc(other, p2))));
      const read = await fx.store.read("counter", "shared");
      expect(read.version).toBe(10);
      expect(read.events.map((e) => e.sequence)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    });

    it("replays into a projection that equals the one built while writing", async () => {
      const live = counter();
      for (const id of ["a", "b", "a", "c", "a"]) {
        await execute(fx.store, live, id, () => [{ type: "t", data: { by: id.charCodeAt(0) } }], meta);
      }
      const replayed = counter();
      const sub = (await fx.reopen()).follow({}, (c) => { replayed.apply(c); });
      await sub.caughtUp;
      await sub.stop();
      for (const id of ["a", "b", "c"]) expect(replayed.get(id)).toEqual(live.get(id));
      expect(replayed.get("a")!.state.count).toBe(3 * 97);
    });

    it("follows from a position and delivers new commits live", async () => {
      const first = await fx.store.append("counter", "a", NO_AGGREGATE, [{ type: "t", data: { by: 1 } }], meta);
      await fx.store.append("other", "z", NO_AGGREGATE, [{ type: "t", data: { by: 9 } }], meta);
      const seen: Commit[] = [];
      const sub = fx.store.follow({ from: first.revision, aggregate: "counter" }, (c) => { seen.push(c); });
      await sub.caughtUp;
      expect(seen).toHaveLength(0);
      await fx.store.append("counter", "a", first, [{ type: "t", data: { by: 2 } }], meta);
      await waitFor(() => seen.length === 1, { what: "live commit" });
      expect(seen[0]!.events[0]!.data).toEqual({ by: 2 });
      await sub.stop();
    });

    it("resumes a durable subscription after its last acknowledged commit and redelivers a failed one", async () => {
      let rev = NO_AGGREGATE;
      for (let i = 1; i <= 3; i++) rev = await fx.store.append("counter", "a", rev, [{ type: "t", data: { by: i } }], meta);
      const seen: number[] = [];
      let failOnce = true;
      const sub = fx.store.subscribe({ durable: "worker", retryDelayMs: 10 }, (c) => {
        const by = (c.events[0]!.data as { by: number }).by;
        if (by === 2 && failOnce) { failOnce = false; throw new Error("transient"); }
        seen.push(by);
      });
      await waitFor(() => seen.length === 3, { what: "three deliveries" });
      expect([...seen].sort()).toEqual([1, 2, 3]);
      await sub.stop();
      await fx.store.append("counter", "a", rev, [{ type: "t", data: { by: 4 } }], meta);
      const after: number[] = [];
      const again = fx.store.subscribe({ durable: "worker" }, (c) => { after.push((c.events[0]!.data as { by: number }).by); });
      await waitFor(() => after.length === 1, { what: "the commit appended while stopped" });
      expect(after).toEqual([4]);
      await again.stop();
    });
  });
}
