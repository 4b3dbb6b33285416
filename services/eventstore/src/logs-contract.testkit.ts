// One contract for every LogStore: the in-memory twin and JetStream must agree on order,
// large logs split in chunks, unknown runs, isolation between runs, following a log while
// it is written, deduplicated retries, retention, and on failing (never answering an
// empty log) while the backend is away.
import { randomBytes } from "node:crypto";
import { UnavailableError, ValidationError, waitFor } from "@ephemera/kit";
import type { LogEntry, LogFollower, LogStore } from "./logs.js";

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

/** A follower and what it has delivered so far. */
function following(store: LogStore, runId: string, since?: number): { follower: LogFollower; got: LogEntry[]; text(): string } {
  const got: LogEntry[] = [];
  const follower = store.follow(runId, since === undefined ? {} : { since }, (e) => got.push(e));
  return { follower, got, text: () => Buffer.concat(got.map((e) => e.data)).toString() };
}

/** Retries a write until the backend takes it (right after an outage the client may still be reconnecting). */
const eventually = (write: () => Promise<void>, what: string) =>
  waitFor(() => write().then(() => true, () => false), { timeoutMs: 15_000, what });

export function logStoreContract(
  name: string, setup: (options?: { retentionMs?: number }) => Promise<LogStoreFixture>, options: LogContractOptions,
): void {
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
        ["entries", () => fx.store.entries(RUN)],
        ["end", () => fx.store.end(RUN)],
      ] as const) {
        const started = Date.now();
        const err = await (fn as () => Promise<unknown>)().then(() => undefined, (e: unknown) => e);
        expect({ what, isUnavailable: err instanceof UnavailableError }).toEqual({ what, isUnavailable: true });
        expect(Date.now() - started).toBeLessThanOrEqual(options.failsWithinMs);
      }
    });

    it("follows a run: what is stored, then each append as it comes, and ends at the log's end", async () => {
      await fx.store.append(RUN, Buffer.from("one\n"));
      const f = following(fx.store, RUN);
      await waitFor(() => f.text() === "one\n", { what: "the stored entry" });
      await fx.store.append(RUN, Buffer.from("two\n"));
      await waitFor(() => f.text() === "one\ntwo\n", { what: "the appended entry" });
      await fx.store.end(RUN);
      expect(await f.follower.done).toBe("ended");
      expect(f.got.map((e) => typeof e.time)).toEqual(["number", "number"]);
      expect(f.got[0]!.time).toBeLessThanOrEqual(f.got[1]!.time);
    });

    it("follows a run that has no log yet; a log already ended is replayed, then the follower ends", async () => {
      const f = following(fx.store, RUN);
      await fx.store.append(RUN, Buffer.from("late\n"));
      await fx.store.end(RUN);
      expect(await f.follower.done).toBe("ended");
      expect(f.text()).toBe("late\n");
      const again = following(fx.store, RUN);
      expect(await again.follower.done).toBe("ended");
      expect(again.text()).toBe("late\n");
    });

    it("writes a log's end once, and reads leave it out", async () => {
      await fx.store.append(RUN, Buffer.from("a\n"));
      await fx.store.end(RUN);
      await fx.store.end(RUN);
      expect((await fx.store.read(RUN)).toString()).toBe("a\n");
      expect((await fx.store.entries(RUN)).map((e) => e.data.toString())).toEqual(["a\n"]);
    });

    it("drain() ends a follower once it has delivered what is stored, for a log whose end was never written", async () => {
      await fx.store.append(RUN, Buffer.from("x\n"));
      await fx.store.append(RUN, Buffer.from("y\n"));
      const f = following(fx.store, RUN);
      f.follower.drain();
      expect(await f.follower.done).toBe("drained");
      expect(f.text()).toBe("x\ny\n");
      const empty = following(fx.store, "rk0001.db.create.nothing.1");
      empty.follower.drain();
      expect(await empty.follower.done).toBe("drained");
      expect(empty.got).toEqual([]);
    });

    it("stop() ends a follower, and nothing reaches it afterwards", async () => {
      const f = following(fx.store, RUN);
      await fx.store.append(RUN, Buffer.from("a\n"));
      await waitFor(() => f.text() === "a\n", { what: "the first entry" });
      await f.follower.stop();
      expect(await f.follower.done).toBe("stopped");
      await fx.store.append(RUN, Buffer.from("b\n"));
      // Another follower seeing b shows it was delivered to whoever followed.
      const witness = following(fx.store, RUN);
      await waitFor(() => witness.text() === "a\nb\n", { what: "the second entry, through another follower" });
      await witness.follower.stop();
      expect(f.text()).toBe("a\n");
    });

    it("gives only the entries stored since a time, to reads and followers", async () => {
      await fx.store.append(RUN, Buffer.from("old\n"));
      const [old] = await fx.store.entries(RUN);
      // The next entry must be stored at a later millisecond than `since`.
      const since = old!.time + 1;
      await waitFor(() => Date.now() > since, { what: "the clock to move past the first entry" });
      await fx.store.append(RUN, Buffer.from("new\n"));
      expect((await fx.store.entries(RUN, { since })).map((e) => e.data.toString())).toEqual(["new\n"]);
      expect((await fx.store.entries(RUN, { since: Date.now() + 60_000 }))).toEqual([]);
      const f = following(fx.store, RUN, since);
      await fx.store.end(RUN);
      expect(await f.follower.done).toBe("ended");
      expect(f.text()).toBe("new\n");
    });

    it("stores an append repeated at the same offset once (a retried flush), a large one too", async () => {
      const big = randomBytes(2 * 64 * 1024 + 100);
      await fx.store.append(RUN, Buffer.from("a"), { offset: 0 });
      await fx.store.append(RUN, Buffer.from("a"), { offset: 0 });
      await fx.store.append(RUN, big, { offset: 1 });
      await fx.store.append(RUN, big, { offset: 1 });
      await fx.store.append(RUN, Buffer.from("z"), { offset: 1 + big.length });
      expect((await fx.store.read(RUN)).equals(Buffer.concat([Buffer.from("a"), big, Buffer.from("z")]))).toBe(true);
    });

    it("refuses to follow a run id that is not literal", async () => {
      const f = following(fx.store, "rk1.>");
      await expect(f.follower.done).rejects.toBeInstanceOf(ValidationError);
    });

    it("fails a follower begun while the backend is away, rather than waiting for ever", async () => {
      await fx.setAvailable(false);
      const started = Date.now();
      const f = following(fx.store, RUN);
      await expect(f.follower.done).rejects.toBeInstanceOf(UnavailableError);
      expect(Date.now() - started).toBeLessThanOrEqual(options.failsWithinMs);
    });

    it("keeps following through an outage: entries written after it arrive, none twice", async () => {
      await fx.store.append(RUN, Buffer.from("before\n"), { offset: 0 });
      const f = following(fx.store, RUN);
      await waitFor(() => f.text() === "before\n", { what: "the first entry" });
      await fx.setAvailable(false);
      await fx.setAvailable(true);
      await eventually(() => fx.store.append(RUN, Buffer.from("after\n"), { offset: 7 }), "an append once the backend is back");
      await eventually(() => fx.store.end(RUN), "the end once the backend is back");
      expect(await f.follower.done).toBe("ended");
      expect(f.text()).toBe("before\nafter\n");
    });

    it("drops a run's log once it is older than the retention period", async () => {
      const short = await setup({ retentionMs: 1000 });
      try {
        await short.store.append(RUN, Buffer.from("short-lived\n"));
        expect((await short.store.read(RUN)).toString()).toBe("short-lived\n");
        // The server expires messages on a timer of its own, late under load: a generous deadline, not a measure.
        await waitFor(async () => (await short.store.read(RUN)).length === 0, { timeoutMs: 60_000, intervalMs: 250, what: "the log to expire" });
        expect(await short.store.entries(RUN)).toEqual([]);
      } finally {
        await short.dispose();
      }
    }, 90_000);

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
