// One contract for every LogStore: the in-memory twin and JetStream must agree on order,
// large logs split in chunks, unknown runs, isolation between runs, and on failing (never
// answering an empty log) while the backend is away.
import { randomBytes } from "node:crypto";
import { UnavailableError, ValidationError, waitFor } from "@ephemera/kit";
import type { LogStore } from "./logs.js";

export interface LogStoreFixture {
  store: LogStore;
  /** Takes the store's backend away (false) or brings it back (true). */
  setAvailable(available: boolean): Promise<void>;
  dispose(): Promise<void>;
}

export interface LogContractOptions {
  /** How long a call may take to fail while the backend is away. */
  failsWithinMs: number;
}

const RUN = "rk0001.db.create.provision.1";

export function logStoreContract(name: string, setup: () => Promise<LogStoreFixture>, options: LogContractOptions): void {
  describe(`LogStore contract: ${name}`, () => {
    let fx: LogStoreFixture;
    beforeEach(async () => { fx = await setup(); });
    afterEach(async () => { await fx.dispose(); });

    it("reads an unknown run as an empty log", async () => {
      const log = await fx.store.read("rk0001.db.create.never.1");
      expect(Buffer.isBuffer(log)).toBe(true);
      expect(log.length).toBe(0);
    });

    it("keeps several appends in order", async () => {
      for (const line of ["one\n", "two\n", "", "three\n"]) await fx.store.append(RUN, Buffer.from(line));
      expect((await fx.store.read(RUN)).toString()).toBe("one\ntwo\nthree\n");
    });

    it("round-trips a log larger than a chunk byte for byte, and appends after it", async () => {
      const big = randomBytes(3 * 64 * 1024 + 12_345);
      await fx.store.append(RUN, Buffer.from("before\n"));
      await fx.store.append(RUN, big);
      await fx.store.append(RUN, Buffer.from("after\n"));
      const read = await fx.store.read(RUN);
      expect(read.length).toBe(7 + big.length + 6);
      expect(read.equals(Buffer.concat([Buffer.from("before\n"), big, Buffer.from("after\n")]))).toBe(true);
    });

    it("keeps each of concurrent large appends to one run whole, in call order", async () => {
      const a = Buffer.alloc(150 * 1024, "a");
      const b = Buffer.alloc(150 * 1024, "b");
      await Promise.all([fx.store.append(RUN, a), fx.store.append(RUN, b)]);
      expect((await fx.store.read(RUN)).equals(Buffer.concat([a, b]))).toBe(true);
    });

    it("keeps runs apart, even when one run id is a prefix of another", async () => {
      await fx.store.append("rk1.db.create.a.1", Buffer.from("run 1\n"));
      await fx.store.append("rk1.db.create.a.10", Buffer.from("run 10\n"));
      await fx.store.append("rk2.db.create.a.1", Buffer.from("other sandbox\n"));
      expect((await fx.store.read("rk1.db.create.a.1")).toString()).toBe("run 1\n");
      expect((await fx.store.read("rk1.db.create.a.10")).toString()).toBe("run 10\n");
      expect((await fx.store.read("rk2.db.create.a.1")).toString()).toBe("other sandbox\n");
    });

    it("refuses run ids that are not literal (wildcards, spaces, empty tokens), so no read spans runs", async () => {
      await fx.store.append("rk1.db.create.a.1", Buffer.from("secret log\n"));
      for (const id of ["rk1.db.create.a.*", "rk1.>", "rk1.db create", "rk1..a", "", ".rk1", "rk1."]) {
        await expect(fx.store.read(id)).rejects.toBeInstanceOf(ValidationError);
        await expect(fx.store.append(id, Buffer.from("x"))).rejects.toBeInstanceOf(ValidationError);
      }
    });

    it("never shares a buffer with its callers", async () => {
      const chunk = Buffer.from("original\n");
      await fx.store.append(RUN, chunk);
      chunk.write("mutated!\n");
      const first = await fx.store.read(RUN);
      first.write("changed!\n");
      expect((await fx.store.read(RUN)).toString()).toBe("original\n");
    });

    it("rejects appends and reads while the backend is away, rather than answering an empty log", async () => {
      await fx.store.append(RUN, Buffer.from("kept\n"));
      await fx.setAvailable(false);
      for (const [what, fn] of [
        ["read", () => fx.store.read(RUN)],
        ["append", () => fx.store.append(RUN, Buffer.from("lost?\n"))],
        ["read of an unknown run", () => fx.store.read("rk9.db.create.a.1")],
      ] as const) {
        const started = Date.now();
        const err = await (fn as () => Promise<unknown>)().then(() => undefined, (e: unknown) => e);
        expect({ what, isUnavailable: err instanceof UnavailableError }).toEqual({ what, isUnavailable: true });
        expect(Date.now() - started).toBeLessThanOrEqual(options.failsWithinMs);
      }
    });

    it("serves again once the backend is back", async () => {
      await fx.store.append(RUN, Buffer.from("kept\n"));
      await fx.setAvailable(false);
      await expect(fx.store.read(RUN)).rejects.toBeInstanceOf(UnavailableError);
      await fx.setAvailable(true);
      const log = await waitFor(() => fx.store.read(RUN).catch(() => undefined), { timeoutMs: 15_000, what: "the log to be readable again" });
      expect(log.toString()).toBe("kept\n");
    });
  });
}
