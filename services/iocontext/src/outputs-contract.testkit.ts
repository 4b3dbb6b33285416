// One contract for every OutputStore: the in-memory twin and Redis must agree on bytes,
// overwrites, sandbox drops, unknown runs, and on failing (fast, without values) while
// the backend is away.
import { randomBytes } from "node:crypto";
import { UnavailableError, waitFor } from "@ephemera/kit";
import type { OutputStore } from "./outputs.js";

export interface OutputStoreFixture {
  store: OutputStore;
  /** Takes the store's backend away (false) or brings it back (true). */
  setAvailable(available: boolean): Promise<void>;
  dispose(): Promise<void>;
}

export interface ContractOptions {
  /** How long a call may take to fail while the backend is away. */
  failsWithinMs: number;
}

const out = (name: string, value: string | Buffer) => ({ name, value: Buffer.from(value) });
const text = (m: Map<string, Buffer>) => Object.fromEntries([...m].map(([k, v]) => [k, v.toString()]));

/** Whether a secret appears anywhere in an error: message, stack, causes, any property. */
export function mentions(value: unknown, secret: string, seen = new Set<unknown>()): boolean {
  if (typeof value === "string") return value.includes(secret);
  if (Buffer.isBuffer(value)) return value.includes(secret);
  if (!value || typeof value !== "object" || seen.has(value)) return false;
  seen.add(value);
  return Object.getOwnPropertyNames(value).some((k) => mentions((value as Record<string, unknown>)[k], secret, seen));
}

export function outputStoreContract(name: string, setup: () => Promise<OutputStoreFixture>, options: ContractOptions): void {
  describe(`OutputStore contract: ${name}`, () => {
    let fx: OutputStoreFixture;
    beforeEach(async () => { fx = await setup(); });
    afterEach(async () => { await fx.dispose(); });

    it("reads an unknown run as an empty map", async () => {
      expect(await fx.store.read("rk.db.create.never.1")).toEqual(new Map());
    });

    it("round-trips values as bytes: every byte value, invalid UTF-8, empty, 1 MiB", async () => {
      const values = {
        all: Buffer.from(Array.from({ length: 256 }, (_, i) => i)),
        invalidUtf8: Buffer.from([0xc3, 0x28, 0xff, 0xfe, 0x00]),
        empty: Buffer.alloc(0),
        large: randomBytes(1024 * 1024),
        unicode: Buffer.from("zürich ✓ 東京\n"),
      };
      await fx.store.write("rk.db.create.a.1", "rk", Object.entries(values).map(([n, v]) => ({ name: n, value: v })));
      const read = await fx.store.read("rk.db.create.a.1");
      expect([...read.keys()].sort()).toEqual(Object.keys(values).sort());
      for (const [n, v] of Object.entries(values)) expect(read.get(n)?.equals(v)).toBe(true);
      expect(Buffer.isBuffer(read.get("all"))).toBe(true);
    });

    it("overwrites outputs of the same name and keeps the others; the last of a name in one write wins", async () => {
      await fx.store.write("rk.db.create.a.1", "rk", [out("host", "old"), out("port", "5432")]);
      await fx.store.write("rk.db.create.a.1", "rk", [out("host", "new"), out("user", "u1"), out("user", "u2")]);
      expect(text(await fx.store.read("rk.db.create.a.1"))).toEqual({ host: "new", port: "5432", user: "u2" });
    });

    it("stores nothing for a write without outputs", async () => {
      await fx.store.write("rk.db.create.a.1", "rk", []);
      expect(await fx.store.read("rk.db.create.a.1")).toEqual(new Map());
      expect(await fx.store.dropSandbox("rk")).toBe(0);
    });

    it("never shares a buffer with its callers", async () => {
      const value = Buffer.from("original");
      await fx.store.write("rk.db.create.a.1", "rk", [{ name: "v", value }]);
      value.write("mutated!");
      const first = await fx.store.read("rk.db.create.a.1");
      expect(first.get("v")?.toString()).toBe("original");
      first.get("v")?.write("changed!");
      expect((await fx.store.read("rk.db.create.a.1")).get("v")?.toString()).toBe("original");
    });

    it("keeps runs apart, even when one run id is a prefix of another", async () => {
      await fx.store.write("rk.db.create.a.1", "rk", [out("v", "one")]);
      await fx.store.write("rk.db.create.a.10", "rk", [out("v", "ten")]);
      expect(text(await fx.store.read("rk.db.create.a.1"))).toEqual({ v: "one" });
      expect(text(await fx.store.read("rk.db.create.a.10"))).toEqual({ v: "ten" });
    });

    it("drops every run of one sandbox and nothing of another", async () => {
      await fx.store.write("rk1.db.create.a.1", "rk1", [out("v", "1a")]);
      await fx.store.write("rk1.db.delete.b.1", "rk1", [out("v", "1b")]);
      await fx.store.write("rk1.db.create.a.1", "rk1", [out("w", "again")]);
      await fx.store.write("rk2.db.create.a.1", "rk2", [out("v", "2a")]);
      expect(await fx.store.dropSandbox("rk1")).toBe(2);
      expect(await fx.store.read("rk1.db.create.a.1")).toEqual(new Map());
      expect(await fx.store.read("rk1.db.delete.b.1")).toEqual(new Map());
      expect(text(await fx.store.read("rk2.db.create.a.1"))).toEqual({ v: "2a" });
      expect(await fx.store.dropSandbox("rk1")).toBe(0);
      expect(await fx.store.dropSandbox("unknown")).toBe(0);
      await fx.store.write("rk1.db.create.a.1", "rk1", [out("v", "back")]);
      expect(text(await fx.store.read("rk1.db.create.a.1"))).toEqual({ v: "back" });
    });

    it("rejects every call with UnavailableError while the backend is away, quickly and without values", async () => {
      const secret = `s3cret-${randomBytes(8).toString("hex")}`;
      await fx.store.write("rk.db.create.a.1", "rk", [out("token", secret)]);
      await fx.setAvailable(false);
      const calls: Array<[string, () => Promise<unknown>]> = [
        ["read", () => fx.store.read("rk.db.create.a.1")],
        ["write", () => fx.store.write("rk.db.create.a.1", "rk", [out("token", secret)])],
        ["dropSandbox", () => fx.store.dropSandbox("rk")],
        ["read again", () => fx.store.read("rk.db.create.a.1")],
      ];
      for (const [what, fn] of calls) {
        const started = Date.now();
        const err = await fn().then(() => undefined, (e: unknown) => e);
        const tookMs = Date.now() - started;
        expect({ what, isUnavailable: err instanceof UnavailableError }).toEqual({ what, isUnavailable: true });
        expect(tookMs).toBeLessThanOrEqual(options.failsWithinMs);
        expect(mentions(err, secret)).toBe(false);
      }
      expect(String((await fx.store.read("rk.db.create.a.1").catch((e: Error) => e)) as Error)).toContain("rk.db.create.a.1");
    });

    it("serves again once the backend is back", async () => {
      await fx.setAvailable(false);
      await expect(fx.store.read("rk.db.create.a.1")).rejects.toBeInstanceOf(UnavailableError);
      await fx.setAvailable(true);
      await waitFor(() => fx.store.write("rk.db.create.a.1", "rk", [out("v", "after")]).then(() => true), {
        timeoutMs: 10_000, what: "the store to take writes again",
      });
      expect(text(await fx.store.read("rk.db.create.a.1"))).toEqual({ v: "after" });
    });
  });
}
