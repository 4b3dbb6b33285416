// One contract for every ClaimStore: JetStream KV and the in-memory twin must agree on who
// holds a claim, when it expires, that a renewal or release after a take-over is refused
// (or changes nothing), and on failing (never answering wrongly) while the backend is away.
import { UnavailableError, waitFor } from "@ephemera/kit";
import { isClaimLostError, type ClaimStore } from "./claims.js";

export interface ClaimStoreFixture {
  store: ClaimStore;
  /** The wall clock the store reads, moved by the test. */
  clock: { now: number };
  /** Takes the backend away (false) or brings it back (true). */
  setAvailable(available: boolean): Promise<void>;
  dispose(): Promise<void>;
}

const RUN = "rk1.db.create.provision.1";

export function claimStoreContract(name: string, setup: () => Promise<ClaimStoreFixture>, { failsWithinMs }: { failsWithinMs: number }): void {
  describe(`ClaimStore contract: ${name}`, () => {
    let fx: ClaimStoreFixture;
    beforeEach(async () => { fx = await setup(); });
    afterEach(async () => { await fx.dispose(); });

    it("gives a free id to the first holder and refuses it to a second while the claim is live", async () => {
      const a = await fx.store.acquire(RUN, "runner-a", 10_000);
      expect(a).toMatchObject({ taken: true, claim: { id: RUN, holder: "runner-a", until: fx.clock.now + 10_000 } });
      const b = await fx.store.acquire(RUN, "runner-b", 10_000);
      expect(b).toMatchObject({ taken: false, claim: { holder: "runner-a" } });
      expect(await fx.store.read(RUN)).toMatchObject({ holder: "runner-a" });
    });

    it("keeps a result with a renewal: later renewals keep it, and the next holder of an expired claim gets it", async () => {
      const a = await fx.store.acquire(RUN, "runner-a", 10_000);
      if (!a.taken) throw new Error("expected to take the claim");
      expect(a.claim.result).toBeUndefined();
      const kept = await fx.store.renew(a.claim, 10_000, '{"type":"succeed"}');
      expect(kept.result).toBe('{"type":"succeed"}');
      const again = await fx.store.renew(kept, 10_000);
      expect(again.result).toBe('{"type":"succeed"}');
      expect(await fx.store.read(RUN)).toMatchObject({ holder: "runner-a", result: '{"type":"succeed"}' });
      // Refused to another holder while live, with what it keeps; carried over once expired.
      expect(await fx.store.acquire(RUN, "runner-b", 10_000)).toMatchObject({ taken: false, claim: { result: '{"type":"succeed"}' } });
      fx.clock.now += 10_000;
      const b = await fx.store.acquire(RUN, "runner-b", 10_000);
      expect(b).toMatchObject({ taken: true, claim: { holder: "runner-b", result: '{"type":"succeed"}' } });
      // Released: nothing is kept for a later claim on the id.
      if (!b.taken) throw new Error("expected to take the claim");
      await fx.store.release(b.claim);
      const c = await fx.store.acquire(RUN, "runner-c", 10_000);
      expect(c.claim.result).toBeUndefined();
    });

    it("gives an expired claim to the next holder, and then refuses the old holder's renewal", async () => {
      const a = await fx.store.acquire(RUN, "runner-a", 10_000);
      if (!a.taken) throw new Error("expected to take the claim");
      fx.clock.now += 10_000;
      const b = await fx.store.acquire(RUN, "runner-b", 10_000);
      expect(b).toMatchObject({ taken: true, claim: { holder: "runner-b" } });
      const lost = await fx.store.renew(a.claim, 10_000).catch((err: unknown) => err);
      expect(isClaimLostError(lost)).toBe(true);
      // The old holder's release leaves the new claim alone.
      await fx.store.release(a.claim);
      expect(await fx.store.read(RUN)).toMatchObject({ holder: "runner-b" });
    });

    it("keeps a renewed claim live past its first expiry", async () => {
      const a = await fx.store.acquire(RUN, "runner-a", 10_000);
      if (!a.taken) throw new Error("expected to take the claim");
      fx.clock.now += 8_000;
      const renewed = await fx.store.renew(a.claim, 10_000);
      expect(renewed.until).toBe(fx.clock.now + 10_000);
      fx.clock.now += 8_000;
      expect(await fx.store.acquire(RUN, "runner-b", 10_000)).toMatchObject({ taken: false, claim: { holder: "runner-a" } });
      // Its holder acquiring again keeps it.
      expect(await fx.store.acquire(RUN, "runner-a", 10_000)).toMatchObject({ taken: true, claim: { holder: "runner-a" } });
    });

    it("frees a released claim for anyone", async () => {
      const a = await fx.store.acquire(RUN, "runner-a", 10_000);
      if (!a.taken) throw new Error("expected to take the claim");
      await fx.store.release(a.claim);
      expect(await fx.store.read(RUN)).toBeUndefined();
      expect(await fx.store.acquire(RUN, "runner-b", 10_000)).toMatchObject({ taken: true, claim: { holder: "runner-b" } });
    });

    it("takes a live claim of a holder said to be gone", async () => {
      await fx.store.acquire(RUN, "host-1-100", 10_000);
      const b = await fx.store.acquire(RUN, "host-1-200", 10_000, { holderGone: (h) => h === "host-1-100" });
      expect(b).toMatchObject({ taken: true, claim: { holder: "host-1-200" } });
    });

    it("fails with UnavailableError while the backend is away, and works again after", async () => {
      await fx.store.acquire(RUN, "runner-a", 10_000);
      await fx.setAvailable(false);
      const started = performance.now();
      const err = await fx.store.acquire(RUN, "runner-b", 10_000).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(UnavailableError);
      expect(performance.now() - started).toBeLessThan(failsWithinMs);
      await fx.setAvailable(true);
      // Reconnecting takes a moment: the claim taken before is read once the backend answers again.
      const back = await waitFor(() => fx.store.read(RUN).catch(() => undefined), { timeoutMs: 10_000, intervalMs: 100, what: "the claim to be read again" });
      expect(back).toMatchObject({ holder: "runner-a" });
    }, failsWithinMs + 10_000);
  });
}
