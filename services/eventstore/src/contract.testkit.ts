// One contract for every EventStore implementation: the in-memory twin and JetStream
// must behave the same for appends, conflicts, duplicates, reads and subscriptions.
import { ConcurrencyError, ConflictError, TooLargeError, UnavailableError, waitFor } from "@ephemera/kit";
import { DEAD_LETTER_AGGREGATE, DEAD_LETTER_TYPE, NO_AGGREGATE, type Commit, type EventStore } from "./types.js";
import { Projection, execute } from "./projection.js";

export interface StoreFixture {
  store: EventStore;
  /** A store on the same backend whose deduplication window is about one second. */
  shortWindow(): Promise<EventStore>;
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

    it("takes an append made at a stream position only while no commit of any aggregate came after it", async () => {
      const a = await fx.store.append("counter", "a", NO_AGGREGATE, [{ type: "t", data: { by: 1 } }], meta);
      const at = await fx.store.position();
      expect(at).toBe(a.revision);
      // Another aggregate moves the store on: the decision made at `at` is refused.
      await fx.store.append("counter", "b", NO_AGGREGATE, [{ type: "t", data: { by: 1 } }], meta);
      await expect(fx.store.append("counter", "a", a, [{ type: "t", data: { by: 2 } }], { ...meta, expectedPosition: at }))
        .rejects.toBeInstanceOf(ConcurrencyError);
      expect((await fx.store.read("counter", "a")).version).toBe(1);
      // Made again at the current position, it lands.
      const now = await fx.store.position();
      const taken = await fx.store.append("counter", "a", a, [{ type: "t", data: { by: 2 } }], { ...meta, expectedPosition: now });
      expect(taken.revision).toBe(now + 1);
      // The aggregate's own revision is still checked alongside.
      await expect(fx.store.append("counter", "a", a, [{ type: "t", data: { by: 3 } }], { ...meta, expectedPosition: taken.revision }))
        .rejects.toBeInstanceOf(ConcurrencyError);
    });

    it("reads the commits another handle appended after this one read or wrote the aggregate", async () => {
      const other = await fx.reopen();
      const first = await fx.store.append("counter", "shared", NO_AGGREGATE, [{ type: "t", data: { by: 1 } }], meta);
      expect((await fx.store.read("counter", "shared")).version).toBe(1);
      const theirs = await other.append("counter", "shared", first, [{ type: "t", data: { by: 2 } }, { type: "t", data: { by: 3 } }], meta);
      const read = await fx.store.read("counter", "shared");
      expect(read).toMatchObject({ revision: theirs.revision, version: 3 });
      expect(read.events.map((e) => e.data)).toEqual([{ by: 1 }, { by: 2 }, { by: 3 }]);
      // And back the other way: the other handle sees this one's next commit.
      await fx.store.append("counter", "shared", read, [{ type: "t", data: { by: 4 } }], meta);
      expect((await other.read("counter", "shared")).events.map((e) => e.data)).toEqual([{ by: 1 }, { by: 2 }, { by: 3 }, { by: 4 }]);
    });

    it("after losing a race, reads the winning commit and appends after it", async () => {
      const other = await fx.reopen();
      const mine = await fx.store.append("counter", "race", NO_AGGREGATE, [{ type: "t", data: { by: 1 } }], meta);
      const won = await other.append("counter", "race", await other.read("counter", "race"), [{ type: "t", data: { by: 10 } }], meta);
      await expect(fx.store.append("counter", "race", mine, [{ type: "t", data: { by: 2 } }], meta)).rejects.toBeInstanceOf(ConcurrencyError);
      const read = await fx.store.read("counter", "race");
      expect(read).toMatchObject({ revision: won.revision, version: 2 });
      const after = await fx.store.append("counter", "race", read, [{ type: "t", data: { by: 2 } }], meta);
      expect((await other.read("counter", "race")).events.map((e) => [e.sequence, e.data, e.position]))
        .toEqual([[1, { by: 1 }, mine.revision], [2, { by: 10 }, won.revision], [3, { by: 2 }, after.revision]]);
    });

    it("reads an aggregate of many commits, interleaved with another's, the same from the writer and from a fresh handle", async () => {
      let a = NO_AGGREGATE;
      let b = NO_AGGREGATE;
      const positions: number[] = [];
      for (let i = 1; i <= 30; i++) {
        a = await fx.store.append("counter", "long", a, Array.from({ length: 1 + (i % 3) }, () => ({ type: "t", data: { by: i } })), meta);
        positions.push(a.revision);
        b = await fx.store.append("counter", "beside", b, [{ type: "t", data: { by: -i } }], meta);
        // Read every few commits, so that later reads start from what an earlier one returned.
        if (i % 7 === 0) expect((await fx.store.read("counter", "long")).revision).toBe(a.revision);
      }
      const fromWriter = await fx.store.read("counter", "long");
      const fromFresh = await (await fx.reopen()).read("counter", "long");
      expect(fromFresh).toEqual(fromWriter);
      expect(fromWriter).toMatchObject({ revision: a.revision, version: a.version });
      expect(fromWriter.events.map((e) => e.sequence)).toEqual(Array.from({ length: a.version }, (_, i) => i + 1));
      expect([...new Set(fromWriter.events.map((e) => e.position))]).toEqual(positions);
      expect(fromWriter.events.every((e) => (e.data as { by: number }).by > 0)).toBe(true);
    });

    it("returns a list the caller may change without changing the next read", async () => {
      await fx.store.append("counter", "own", NO_AGGREGATE, [{ type: "t", data: { by: 1 } }], meta);
      const read = await fx.store.read("counter", "own");
      read.events.push({ ...read.events[0]!, sequence: 2 });
      read.events.shift();
      expect((await fx.store.read("counter", "own")).events.map((e) => e.sequence)).toEqual([1]);
    });

    it("refuses a commit over the server's max payload as too large (not retryable), writing nothing", async () => {
      const err = await fx.store.append("counter", "huge", NO_AGGREGATE, [{ type: "t", data: { by: "x".repeat(2 * 1024 * 1024) } }], meta)
        .then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(TooLargeError);
      expect((err as Error).message).toMatch(/counter\.huge is \d+ bytes, over the server's max_payload of \d+ bytes/);
      expect(await fx.store.read("counter", "huge")).toEqual({ events: [], revision: 0, version: 0 });
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

    it("follows from a time: only the commits stored at or after it, then live ones", async () => {
      const old = await fx.store.append("counter", "a", NO_AGGREGATE, [{ type: "t", data: { by: 1 } }], meta);
      // The next commit is stored strictly later than the first (the clocks count milliseconds).
      const since = new Date(Date.now() + 1);
      await waitFor(() => Date.now() > since.getTime(), { what: "the clock to pass the start time" });
      const recent = await fx.store.append("counter", "a", old, [{ type: "t", data: { by: 2 } }], meta);
      const seen: Commit[] = [];
      const sub = fx.store.follow({ since }, (c) => { seen.push(c); });
      await sub.caughtUp;
      expect(seen.map((c) => c.position)).toEqual([recent.revision]);
      await fx.store.append("counter", "a", recent, [{ type: "t", data: { by: 3 } }], meta);
      await waitFor(() => seen.length === 2, { what: "the live commit" });
      await sub.stop();
    });

    it("resumes a durable subscription after its last acknowledged commit and redelivers a failed one", async () => {
      let rev = NO_AGGREGATE;
      for (let i = 1; i <= 3; i++) rev = await fx.store.append("counter", "a", rev, [{ type: "t", data: { by: i } }], meta);
      const seen: number[] = [];
      let failOnce = true;
      const sub = fx.store.subscribe({ durable: "worker", redelivery: { backoffMs: [10] } }, (c) => {
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

    it("keeps delivering other commits while a failing one waits for its redelivery", async () => {
      let rev = NO_AGGREGATE;
      for (let i = 1; i <= 4; i++) rev = await fx.store.append("counter", "a", rev, [{ type: "t", data: { by: i } }], meta);
      const seen: number[] = [];
      let failures = 0;
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      const sub = fx.store.subscribe({ durable: "isolated", redelivery: { backoffMs: [50] } }, async (c) => {
        const by = (c.events[0]!.data as { by: number }).by;
        if (by === 1 && failures === 0) { failures++; throw new UnavailableError("not yet"); }
        seen.push(by);
        if (by === 4) release();
        if (by === 1) await released;
      });
      // 2, 3 and 4 pass while 1 waits; then 1 comes back.
      await waitFor(() => seen.length === 4, { what: "every commit, the failed one last" });
      expect(seen).toEqual([2, 3, 4, 1]);
      await sub.stop();
    });

    it("delivers a commit again later when its handler asks, the others flowing meanwhile, and no dead letter of it", async () => {
      const first = await fx.store.append("counter", "later", NO_AGGREGATE, [{ type: "t", data: { by: 1 } }], meta);
      let rev = first;
      for (let i = 2; i <= 3; i++) rev = await fx.store.append("counter", "later", rev, [{ type: "t", data: { by: i } }], meta);
      const seen: Array<{ by: number; at: number }> = [];
      const asked = new Map<number, number>();
      // maxDeliver 2: asking again must not count as a failure towards a dead letter.
      const sub = fx.store.subscribe({ durable: "later", aggregate: "counter", redelivery: { maxDeliver: 2, backoffMs: [10] } }, (c) => {
        const by = (c.events[0]!.data as { by: number }).by;
        if (by === 1 && !asked.has(by)) {
          asked.set(by, performance.now());
          return { againInMs: 150 };
        }
        seen.push({ by, at: performance.now() });
        return undefined;
      });
      await waitFor(() => seen.length === 3, { what: "every commit, the one asked again for last" });
      expect(seen.map((s) => s.by)).toEqual([2, 3, 1]);
      // Not before the delay it asked for (less a timer's slack).
      expect(seen[2]!.at - asked.get(1)!).toBeGreaterThanOrEqual(140);
      await sub.stop();
      // Handled the second time: acknowledged, not delivered to the next subscription of the durable.
      await fx.store.append("counter", "later", rev, [{ type: "t", data: { by: 4 } }], meta);
      const after: number[] = [];
      const again = fx.store.subscribe({ durable: "later", aggregate: "counter" }, (c) => { after.push((c.events[0]!.data as { by: number }).by); });
      await waitFor(() => after.length === 1, { what: "the commit appended since" });
      expect(after).toEqual([4]);
      expect((await fx.store.read(DEAD_LETTER_AGGREGATE, `later.${first.revision}`)).events).toEqual([]);
      await again.stop();
    });

    it("records a commit that keeps failing as a dead letter after maxDeliver and moves on", async () => {
      const poison = await fx.store.append("counter", "poison", NO_AGGREGATE, [{ type: "t", data: { by: 1 } }], meta);
      const rev = await fx.store.append("counter", "poison", poison, [{ type: "t", data: { by: 2 } }], meta);
      let attempts = 0;
      const ok: number[] = [];
      const sub = fx.store.subscribe({ durable: "poisoned", aggregate: "counter", redelivery: { maxDeliver: 3, backoffMs: [20] } }, (c) => {
        const by = (c.events[0]!.data as { by: number }).by;
        if (by === 1) { attempts++; throw new UnavailableError("always down"); }
        ok.push(by);
      });
      const letter = await waitFor(async () => (await fx.store.read(DEAD_LETTER_AGGREGATE, `poisoned.${poison.revision}`)).events[0],
        { what: "the dead letter" });
      expect(letter.type).toBe(DEAD_LETTER_TYPE);
      expect(letter.data).toMatchObject({ consumer: "poisoned", aggregate: "counter", aggregateId: "poison", deliveries: 3, retryable: true, reason: "always down" });
      expect(attempts).toBe(3);
      expect(ok).toEqual([2]);
      await fx.store.append("counter", "poison", rev, [{ type: "t", data: { by: 3 } }], meta);
      await waitFor(() => ok.length === 2, { what: "a commit after the dead letter" });
      expect(attempts).toBe(3);
      await sub.stop();
    });

    it("with maxDeliver Infinity, retries a retryable failure for as long as it lasts, and no dead letter is made", async () => {
      const first = await fx.store.append("counter", "outage", NO_AGGREGATE, [{ type: "t", data: { by: 1 } }], meta);
      let attempts = 0;
      const sub = fx.store.subscribe({ durable: "patient", aggregate: "counter", redelivery: { maxDeliver: Infinity, backoffMs: [1] } }, () => {
        // Past the default bound of 8 deliveries (and any the server keeps).
        if (++attempts < 25) throw new UnavailableError("down for a while");
      });
      await waitFor(() => attempts === 25, { timeoutMs: 20_000, what: "the 25th delivery" });
      expect((await fx.store.read(DEAD_LETTER_AGGREGATE, `patient.${first.revision}`)).events).toEqual([]);
      await sub.stop();
    });

    it("makes a dead letter at once of an error that says retrying cannot help", async () => {
      const first = await fx.store.append("counter", "bad", NO_AGGREGATE, [{ type: "t", data: { by: 1 } }], meta);
      let attempts = 0;
      const sub = fx.store.subscribe({ durable: "strict", aggregate: "counter" }, () => { attempts++; throw new ConflictError("never valid"); });
      const letter = await waitFor(async () => (await fx.store.read(DEAD_LETTER_AGGREGATE, `strict.${first.revision}`)).events[0],
        { what: "the dead letter" });
      expect(letter.data).toMatchObject({ deliveries: 1, retryable: false, reason: "never valid", types: ["t"] });
      expect(attempts).toBe(1);
      await sub.stop();
    });

    it("shares one durable between two subscriptions: each commit handled by one of them", async () => {
      const other = await fx.reopen();
      const byA: number[] = [];
      const byB: number[] = [];
      // Each handler holds its commit until both subscriptions have one: proof they run side by side.
      let holding = 0;
      let both!: () => void;
      const bothHolding = new Promise<void>((r) => (both = r));
      const hold = async (into: number[], c: Commit) => {
        into.push((c.events[0]!.data as { by: number }).by);
        if (++holding === 2) both();
        await bothHolding;
      };
      const a = fx.store.subscribe({ durable: "shared", aggregate: "counter" }, (c) => hold(byA, c));
      const b = other.subscribe({ durable: "shared", aggregate: "counter" }, (c) => hold(byB, c));
      let rev = NO_AGGREGATE;
      for (let i = 1; i <= 10; i++) rev = await fx.store.append("counter", "s", rev, [{ type: "t", data: { by: i } }], meta);
      await waitFor(() => byA.length + byB.length === 10, { what: "ten deliveries" });
      expect([...byA, ...byB].sort((x, y) => x - y)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      expect(byA.length).toBeGreaterThan(0);
      expect(byB.length).toBeGreaterThan(0);
      await Promise.all([a.stop(), b.stop()]);
    });

    it("forgets a commit id once the deduplication window has passed", async () => {
      const store = await fx.shortWindow();
      const a = await store.append("counter", "w", NO_AGGREGATE, [{ type: "t", data: { by: 1 } }], { ...meta, commitId: "w-1" });
      const dup = await store.append("counter", "w", a, [{ type: "t", data: { by: 1 } }], { ...meta, commitId: "w-1" });
      expect(dup.duplicate).toBe(true);
      // Within the window every attempt is dropped; after it, the same id is a new commit.
      const fresh = await waitFor(async () => {
        const r = await store.append("counter", "w", a, [{ type: "t", data: { by: 1 } }], { ...meta, commitId: "w-1" });
        return r.duplicate ? undefined : r;
      }, { timeoutMs: 10_000, intervalMs: 200, what: "the window to pass" });
      expect(fresh.version).toBe(2);
    });
  });
}
