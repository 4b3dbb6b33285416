// One contract for every LeaseStore, through the Lease that runs on it: the in-memory twin
// and the JetStream KV bucket must give the same answers to acquire, renew, hand over,
// release and, above all, never two holders at once.
import { ConcurrencyError, UnavailableError, waitFor } from "@ephemera/kit";
import { Lease, type LeaseEntry, type LeaseOptions, type LeaseRecord, type LeaseStore } from "./lease.js";

export interface LeaseFixture {
  store: LeaseStore;
  dispose(): Promise<void>;
}

/** A view of a store that can be cut off (as a holder partitioned from NATS) and whose calls can be held at a gate. */
class Handle implements LeaseStore {
  cut = false;
  beforeWrite?: () => Promise<void>;
  readonly writes: Array<"ok" | "conflict"> = [];
  constructor(private readonly inner: LeaseStore) {}
  async read(name: string): Promise<LeaseEntry> {
    if (this.cut) throw new UnavailableError("cut off");
    return this.inner.read(name);
  }
  async write(name: string, record: LeaseRecord, revision: number): Promise<number> {
    if (this.cut) throw new UnavailableError("cut off");
    await this.beforeWrite?.();
    try {
      const r = await this.inner.write(name, record, revision);
      this.writes.push("ok");
      return r;
    } catch (err) {
      if (err instanceof ConcurrencyError) this.writes.push("conflict");
      throw err;
    }
  }
}

/** A holder with a log of when it acted: acquired and lost, by the test's clock. */
function holder(store: LeaseStore, name: string, id: string, ttlMs: number, extra: Partial<LeaseOptions> = {}) {
  const log: Array<{ at: number; what: "acquired" | "lost" }> = [];
  const lease = Lease.hold(store, {
    name, holder: id, ttlMs, ...extra,
    onAcquired: () => { log.push({ at: Date.now(), what: "acquired" }); extra.onAcquired?.(); },
    onLost: () => { log.push({ at: Date.now(), what: "lost" }); extra.onLost?.(); },
  });
  return { lease, log };
}

export function leaseContract(name: string, setup: () => Promise<LeaseFixture>): void {
  describe(`Lease contract: ${name}`, () => {
    let fx: LeaseFixture;
    const leases: Lease[] = [];
    beforeEach(async () => { fx = await setup(); });
    afterEach(async () => {
      for (const l of leases.splice(0)) await l.stop();
      await fx.dispose();
    });
    const hold = (store: LeaseStore, id: string, ttlMs: number, extra?: Partial<LeaseOptions>) => {
      const h = holder(store, "role", id, ttlMs, extra);
      leases.push(h.lease);
      return h;
    };

    it("is acquired by a lone contender and recorded under its name", async () => {
      const a = hold(fx.store, "a", 2000);
      await waitFor(() => a.lease.held, { what: "a to hold the lease" });
      const { record, revision } = await fx.store.read("role");
      expect(record?.holder).toBe("a");
      expect(record!.until).toBeGreaterThan(Date.now());
      expect(revision).toBeGreaterThan(0);
      expect(a.log.map((e) => e.what)).toEqual(["acquired"]);
    });

    it("is renewed every ttl/3: held without a break for many ttls, its claim moving on", async () => {
      const a = hold(fx.store, "a", 300);
      await waitFor(() => a.lease.held);
      const first = (await fx.store.read("role")).record!.until;
      // Five ttls later: renewed (a later claim) and never lost in between.
      await waitFor(async () => ((await fx.store.read("role")).record!.until > first + 1200 ? true : undefined), { what: "five ttls of renewals" });
      expect(a.lease.held).toBe(true);
      expect(a.log.map((e) => e.what)).toEqual(["acquired"]);
    });

    it("hands over when the holder stops renewing: the holder stops acting before the contender starts", async () => {
      const aStore = new Handle(fx.store);
      const a = hold(aStore, "a", 400);
      await waitFor(() => a.lease.held);
      // Whether a still held it at the moment b started acting (both in this process, one clock).
      const aHeldWhenBAcquired: boolean[] = [];
      const b = hold(fx.store, "b", 400, { onAcquired: () => aHeldWhenBAcquired.push(a.lease.held) });
      // b contends while a renews: it never gets it.
      await waitFor(async () => ((await fx.store.read("role")).revision >= 3 ? true : undefined), { what: "a to renew twice" });
      expect(b.lease.held).toBe(false);
      aStore.cut = true;
      await waitFor(() => b.lease.held, { what: "b to take over", timeoutMs: 5000 });
      expect(a.lease.held).toBe(false);
      expect(aHeldWhenBAcquired).toEqual([false]);
      await waitFor(() => a.log.some((e) => e.what === "lost"), { what: "a's loss to be said" });
      expect((await fx.store.read("role")).record?.holder).toBe("b");
    });

    it("never has two holders at once: two contenders that both read it free both write, and one write fails", async () => {
      // The barrier: neither writes until both have read the lease as free.
      let arrived = 0;
      let open!: () => void;
      const gate = new Promise<void>((r) => (open = r));
      const meet = async () => { if (++arrived === 2) open(); await gate; };
      const aStore = new Handle(fx.store);
      const bStore = new Handle(fx.store);
      aStore.beforeWrite = meet;
      bStore.beforeWrite = meet;
      const a = hold(aStore, "a", 2000);
      const b = hold(bStore, "b", 2000);
      await waitFor(() => aStore.writes.length + bStore.writes.length === 2, { what: "both first writes" });
      aStore.beforeWrite = undefined;
      bStore.beforeWrite = undefined;
      expect([...aStore.writes, ...bStore.writes].sort()).toEqual(["conflict", "ok"]);
      await waitFor(() => a.lease.held || b.lease.held);
      expect(a.lease.held && b.lease.held).toBe(false);
      const winner = a.lease.held ? "a" : "b";
      expect((await fx.store.read("role")).record?.holder).toBe(winner);
      expect([...a.log, ...b.log].filter((e) => e.what === "acquired")).toHaveLength(1);
    });

    it("is released on stop: a contender takes it before the holder's claim would have ended", async () => {
      const a = hold(fx.store, "a", 3000);
      await waitFor(() => a.lease.held);
      const b = hold(fx.store, "b", 3000);
      const claimed = (await fx.store.read("role")).record!.until;
      await a.lease.stop();
      expect(a.lease.held).toBe(false);
      await waitFor(() => b.lease.held, { what: "b to take the released lease", timeoutMs: 5000 });
      expect(b.log[0]!.at).toBeLessThan(claimed);
    });

    it("a holder cut off from the store stops acting by its own clock, before its claim ends", async () => {
      const aStore = new Handle(fx.store);
      const a = hold(aStore, "a", 600);
      await waitFor(() => a.lease.held);
      aStore.cut = true;
      const claimed = (await fx.store.read("role")).record!.until;
      // Every moment it was seen holding came before its claim's end (the clock read first).
      let lastSeenHeld = 0;
      await waitFor(() => {
        const at = Date.now();
        if (!a.lease.held) return true;
        lastSeenHeld = at;
        return undefined;
      }, { what: "a to stop acting", timeoutMs: 3000 });
      expect(lastSeenHeld).toBeGreaterThan(0);
      expect(lastSeenHeld).toBeLessThan(claimed);
      await waitFor(() => a.log.at(-1)?.what === "lost", { what: "a's loss to be said" });
    });

    it("refuses a write over a revision that is not the key's", async () => {
      const r1 = await fx.store.write("other", { holder: "x", until: 1 }, 0);
      await expect(fx.store.write("other", { holder: "y", until: 1 }, 0)).rejects.toBeInstanceOf(ConcurrencyError);
      const r2 = await fx.store.write("other", { holder: "y", until: 2 }, r1);
      await expect(fx.store.write("other", { holder: "z", until: 3 }, r1)).rejects.toBeInstanceOf(ConcurrencyError);
      expect(await fx.store.read("other")).toEqual({ record: { holder: "y", until: 2 }, revision: r2 });
    });
  });
}
