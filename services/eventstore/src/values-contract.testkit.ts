// One contract for every ValueStore: JetStream's object store and the in-memory twin must
// agree on round trips of large values, idempotent puts, digests checked on every read,
// missing values, dropping a sandbox's values, and failing (never answering wrongly) while
// the backend is away.
import { createHash, randomBytes } from "node:crypto";
import { ConflictError, NotFoundError, UnavailableError, waitFor } from "@ephemera/kit";
import type { ValueStore } from "./values.js";

export interface ValueStoreFixture {
  store: ValueStore;
  /** Takes the backend away (false) or brings it back (true). */
  setAvailable(available: boolean): Promise<void>;
  dispose(): Promise<void>;
}

const MiB = 1024 * 1024;
const sha = (v: Uint8Array) => createHash("sha256").update(v).digest("hex");

export function valueStoreContract(name: string, setup: () => Promise<ValueStoreFixture>, { failsWithinMs }: { failsWithinMs: number }): void {
  describe(`ValueStore contract: ${name}`, () => {
    let fx: ValueStoreFixture;
    beforeEach(async () => { fx = await setup(); });
    afterEach(async () => { await fx.dispose(); });

    it("gives back three 1 MiB values of one run, each checked against its digest", async () => {
      const values = [randomBytes(MiB), randomBytes(MiB), randomBytes(MiB)];
      const digests = [];
      for (const [i, v] of values.entries()) digests.push(await fx.store.put(`rk1.db.create.a.1/out${i}`, v));
      expect(digests).toEqual(values.map(sha));
      for (const [i, v] of values.entries()) expect((await fx.store.get(`rk1.db.create.a.1/out${i}`, digests[i]!)).equals(v)).toBe(true);
    });

    it("keeps an empty value, and takes the same value again without change", async () => {
      const d = await fx.store.put("rk1.db.create.a.1/empty", Buffer.alloc(0));
      expect(await fx.store.put("rk1.db.create.a.1/empty", Buffer.alloc(0))).toBe(d);
      expect((await fx.store.get("rk1.db.create.a.1/empty", d)).length).toBe(0);
    });

    it("refuses a value that does not match the digest asked for, and a missing one, by name", async () => {
      await fx.store.put("rk1.db.create.a.1/host", Buffer.from("db-1"));
      const wrong = await fx.store.get("rk1.db.create.a.1/host", sha(Buffer.from("db-2"))).catch((e: unknown) => e);
      expect(wrong).toBeInstanceOf(ConflictError);
      expect((wrong as Error).message).toContain("rk1.db.create.a.1/host");
      expect((wrong as Error).message).not.toContain("db-1");
      await expect(fx.store.get("rk1.db.create.a.1/nothing", sha(Buffer.from("x")))).rejects.toBeInstanceOf(NotFoundError);
    });

    it("reads a value back unchecked (no digest named yet), and a missing one as undefined", async () => {
      await fx.store.put("rk1.db.create.a.1/host", Buffer.from("db-1"));
      expect((await fx.store.read("rk1.db.create.a.1/host"))?.toString()).toBe("db-1");
      expect(await fx.store.read("rk1.db.create.a.1/nothing")).toBeUndefined();
    });

    it("names the digest of a value without fetching it (the same one put gave), and none for a missing one", async () => {
      const value = randomBytes(MiB + 17);
      const put = await fx.store.put("rk1.db.create.a.1/big", value);
      expect(await fx.store.digest("rk1.db.create.a.1/big")).toBe(put);
      expect(await fx.store.digest("rk1.db.create.a.1/big")).toBe(sha(value));
      await fx.store.put("rk1.db.create.a.1/empty", Buffer.alloc(0));
      expect(await fx.store.digest("rk1.db.create.a.1/empty")).toBe(sha(Buffer.alloc(0)));
      expect(await fx.store.digest("rk1.db.create.a.1/nothing")).toBeUndefined();
      await fx.store.remove(["rk1.db.create.a.1/big"]);
      expect(await fx.store.digest("rk1.db.create.a.1/big")).toBeUndefined();
    });

    it("drops the values under a prefix (a deleted sandbox's runs) and no others", async () => {
      const a = await fx.store.put("rka.db.create.a.1/x", Buffer.from("1"));
      await fx.store.put("rka.db.delete.b.1/y", Buffer.from("2"));
      const b = await fx.store.put("rkb.db.create.a.1/x", Buffer.from("3"));
      expect(await fx.store.drop("rka.")).toBe(2);
      await expect(fx.store.get("rka.db.create.a.1/x", a)).rejects.toBeInstanceOf(NotFoundError);
      expect((await fx.store.get("rkb.db.create.a.1/x", b)).toString()).toBe("3");
    });

    it("removes the values under the keys named (a missing one is no error) and no others", async () => {
      const a = await fx.store.put("rka.db.create.a.1/x", Buffer.from("1"));
      await fx.store.put("rka.db.create.a.2/x", Buffer.from(""));
      const b = await fx.store.put("rkb.db.create.a.1/x", Buffer.from("3"));
      const keys = ["rka.db.create.a.1/x", "rka.db.create.a.2/x", "rka.db.create.a.3/x"];
      expect(await fx.store.remove(keys)).toBe(2);
      expect(await fx.store.remove(keys)).toBe(0);
      expect(await fx.store.remove([])).toBe(0);
      await expect(fx.store.get("rka.db.create.a.1/x", a)).rejects.toBeInstanceOf(NotFoundError);
      expect(await fx.store.read("rka.db.create.a.2/x")).toBeUndefined();
      expect((await fx.store.get("rkb.db.create.a.1/x", b)).toString()).toBe("3");
      await fx.store.put("rka.db.create.a.1/x", Buffer.from("again"));
      expect((await fx.store.read("rka.db.create.a.1/x"))?.toString()).toBe("again");
    });

    it("fails as unavailable while the backend is away, and works again after", async () => {
      const d = await fx.store.put("rk1.db.create.a.1/kept", Buffer.from("v"));
      await fx.setAvailable(false);
      for (const call of [() => fx.store.put("rk1.db.create.a.1/new", Buffer.from("n")), () => fx.store.get("rk1.db.create.a.1/kept", d),
        () => fx.store.read("rk1.db.create.a.1/kept"), () => fx.store.digest("rk1.db.create.a.1/kept"), () => fx.store.remove(["rk1.db.create.a.1/kept"]), () => fx.store.drop("rk1.")]) {
        const started = Date.now();
        await expect(call()).rejects.toBeInstanceOf(UnavailableError);
        expect(Date.now() - started).toBeLessThan(failsWithinMs);
      }
      await fx.setAvailable(true);
      await waitFor(() => fx.store.get("rk1.db.create.a.1/kept", d).then((v) => v.toString() === "v", () => false), { timeoutMs: 15_000, what: "the journal back" });
    });
  });
}
