// One contract for every SnapshotStore, and for a Feed restoring from it: JetStream's object
// store and the in-memory twin must agree on round trips of large snapshots, a lower
// position never replacing a higher one, failing while the backend is away, and a feed that
// restores what it wrote and passes over what is missing, corrupt or of other code.
import { randomBytes } from "node:crypto";
import { serialize } from "node:v8";
import { UnavailableError, waitFor, type Logger } from "@ephemera/kit";
import { Feed, Projection } from "./projection.js";
import type { SnapshotStore } from "./snapshots.js";
import { NO_AGGREGATE, type EventStore, type Expected } from "./types.js";

export interface SnapshotStoreFixture {
  store: SnapshotStore;
  /** The event store the feeds follow (the same backend as the snapshots). */
  events: EventStore;
  /** Takes the snapshot backend away (false) or brings it back (true). */
  setAvailable(available: boolean): Promise<void>;
  dispose(): Promise<void>;
}

interface Line { level: string; msg: string | undefined }

function recordingLogger(): { logger: Logger; lines: Line[] } {
  const lines: Line[] = [];
  const at = (level: string) => (_fields: unknown, msg?: string) => { lines.push({ level, msg }); };
  const logger = {
    trace: at("trace"), debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error"), fatal: at("fatal"),
    child: () => logger,
  };
  return { logger: logger as unknown as Logger, lines };
}

/** Tallies per id; an id whose tally reaches `closed` is retired. */
const tallies = () => new Projection<{ n: number; closed: boolean }>(
  "tally", () => ({ n: 0, closed: false }),
  (s, e) => (e.type === "closed" ? { ...s, closed: true } : { ...s, n: s.n + 1 }),
  { retired: (s) => s.closed },
);

const MiB = 1024 * 1024;
const meta = { source: "test" };

export function snapshotStoreContract(name: string, setup: () => Promise<SnapshotStoreFixture>, { failsWithinMs }: { failsWithinMs: number }): void {
  describe(`SnapshotStore contract: ${name}`, () => {
    let fx: SnapshotStoreFixture;
    beforeEach(async () => { fx = await setup(); });
    afterEach(async () => { await fx.dispose(); });

    const append = async (id: string, expected: Expected, type = "tick") => fx.events.append("tally", id, expected, [{ type, data: {} }], meta);
    const feedOf = (logger?: Logger, fingerprint = "code-a") => {
      const projection = tallies();
      const feed = new Feed(fx.events, [projection], logger, { store: fx.store, name: "tallies", fingerprint });
      return { projection, feed };
    };

    it("reads nothing under a name never written", async () => {
      await expect(fx.store.read("nothing")).resolves.toBeUndefined();
    });

    it("gives back a 3 MiB snapshot as written, and a higher position replaces it", async () => {
      const body = randomBytes(3 * MiB);
      await expect(fx.store.write("big", { position: 10, fingerprint: "f", body })).resolves.toBe(true);
      const read = await fx.store.read("big");
      expect({ position: read?.position, fingerprint: read?.fingerprint, same: Buffer.from(read!.body).equals(body) })
        .toEqual({ position: 10, fingerprint: "f", same: true });
      await fx.store.write("big", { position: 11, fingerprint: "f", body: Uint8Array.of(1) });
      expect(await fx.store.read("big")).toEqual({ position: 11, fingerprint: "f", body: Uint8Array.of(1) });
    });

    it("keeps a higher position of the same code when a lower one is written; other code replaces it", async () => {
      await fx.store.write("s", { position: 20, fingerprint: "f", body: Uint8Array.of(20) });
      await expect(fx.store.write("s", { position: 19, fingerprint: "f", body: Uint8Array.of(19) })).resolves.toBe(false);
      expect((await fx.store.read("s"))?.position).toBe(20);
      await expect(fx.store.write("s", { position: 5, fingerprint: "g", body: Uint8Array.of(5) })).resolves.toBe(true);
      expect(await fx.store.read("s")).toEqual({ position: 5, fingerprint: "g", body: Uint8Array.of(5) });
    });

    it("fails with UnavailableError while the backend is away, and works once it is back", async () => {
      await fx.setAvailable(false);
      const began = Date.now();
      await expect(fx.store.write("s", { position: 1, fingerprint: "f", body: Uint8Array.of(1) })).rejects.toBeInstanceOf(UnavailableError);
      await expect(fx.store.read("s")).rejects.toBeInstanceOf(UnavailableError);
      expect(Date.now() - began).toBeLessThan(2 * failsWithinMs);
      await fx.setAvailable(true);
      await waitFor(() => fx.store.write("s", { position: 1, fingerprint: "f", body: Uint8Array.of(1) }).catch(() => false), { timeoutMs: 15_000, what: "the store back" });
      expect((await fx.store.read("s"))?.position).toBe(1);
    });

    it("a feed restores the snapshot written at its stop, follows from its position, and ends where a full replay does", async () => {
      const a = await append("a", NO_AGGREGATE);
      const b = await append("b", NO_AGGREGATE);
      await append("b", b, "closed");
      const first = feedOf();
      await first.feed.start();
      expect(first.feed.startedFrom).toBe(0);
      await first.feed.stop();
      const stopped = first.feed.position;
      expect((await fx.store.read("tallies"))?.position).toBe(stopped);

      await append("a", a);
      const c = await append("c", NO_AGGREGATE);
      const second = feedOf();
      await second.feed.start();
      const replay = tallies();
      const full = new Feed(fx.events, [replay]);
      await full.start();
      expect(second.feed.startedFrom).toBe(stopped);
      expect(second.feed.position).toBe(c.revision);
      expect([...second.projection.entries()]).toEqual([...replay.entries()]);
      // The retired tally is in neither.
      expect([...second.projection.entries()].map(([id]) => id).sort()).toEqual(["a", "c"]);
      await Promise.all([second.feed.stop(), full.stop()]);
    });

    it("passes over a corrupt snapshot, one of other code and one of other projections, for a full replay, with an info line", async () => {
      await append("a", NO_AGGREGATE);
      const end = await fx.events.position();
      const cases: Array<[string, () => Promise<unknown>, string]> = [
        ["corrupt", () => fx.store.write("tallies", { position: end, fingerprint: "code-a", body: Uint8Array.of(0xff, 0x0d, 0x6f) }), "corrupt"],
        ["other code", async () => {
          const other = feedOf(undefined, "code-b");
          await other.feed.start();
          await other.feed.stop();
        }, "other code"],
        ["other projections", () => fx.store.write("tallies", {
          position: end, fingerprint: "code-a",
          body: serialize({ schema: 1, feed: "tallies", fingerprint: "code-a", position: end, aggregates: ["other"], images: [] }),
        }), "other projections"],
      ];
      for (const [, write, why] of cases) {
        await write();
        const { logger, lines } = recordingLogger();
        const { projection, feed } = feedOf(logger);
        await feed.start();
        expect({ startedFrom: feed.startedFrom, a: projection.get("a")?.state.n }).toEqual({ startedFrom: 0, a: 1 });
        expect(lines.filter((l) => l.level === "info" && l.msg?.includes(why) && l.msg.includes("replaying the whole stream"))).toHaveLength(1);
        await feed.stop();
        // The stop wrote this code's snapshot over it: the next case writes its own.
      }
    });

    it("a feed whose snapshot store is away starts by a full replay", async () => {
      await append("a", NO_AGGREGATE);
      await fx.setAvailable(false);
      const { logger, lines } = recordingLogger();
      const { projection, feed } = feedOf(logger);
      await feed.start();
      expect({ startedFrom: feed.startedFrom, a: projection.get("a")?.state.n }).toEqual({ startedFrom: 0, a: 1 });
      expect(lines.some((l) => l.level === "info" && l.msg?.includes("cannot be read"))).toBe(true);
      await feed.stop();
      expect(lines.filter((l) => l.level === "warn").map((l) => l.msg)).toEqual(["cannot write the projections' snapshot; will try again"]);
      await fx.setAvailable(true);
    });
  });
}
