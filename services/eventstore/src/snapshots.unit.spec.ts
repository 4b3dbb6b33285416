import type { Logger } from "@ephemera/kit";
import { InMemoryEventStore } from "./memory.js";
import { Feed, Projection } from "./projection.js";
import { InMemorySnapshotStore, type SnapshotStore } from "./snapshots.js";
import { NO_AGGREGATE } from "./types.js";
import { snapshotStoreContract } from "./snapshots-contract.testkit.js";

snapshotStoreContract("in memory", async () => {
  const store = new InMemorySnapshotStore();
  return { store, events: new InMemoryEventStore(), setAvailable: async (a) => store.setAvailable(a), dispose: async () => undefined };
}, { failsWithinMs: 100 });

describe("a feed whose snapshot store never answers", () => {
  it("starts by a full replay once its read timeout passed, saying why", async () => {
    const events = new InMemoryEventStore();
    let v = NO_AGGREGATE;
    for (let i = 0; i < 3; i++) v = await events.append("c", "x", v, [{ type: "t", data: {} }], { source: "test" });
    const silent: SnapshotStore = { read: () => new Promise(() => undefined), write: async () => true };
    const lines: string[] = [];
    const logger = { info: (_: object, msg: string) => lines.push(msg), warn: () => undefined, error: () => undefined, debug: () => undefined } as unknown as Logger;
    const counts = new Projection<number>("c", () => 0, (n) => n + 1);
    const feed = new Feed(events, [counts], logger, { store: silent, name: "c", fingerprint: "f", readTimeoutMs: 100 });
    await feed.start();
    expect(counts.get("x")!.state).toBe(3);
    expect(lines).toContainEqual(expect.stringMatching(/no snapshot of the projections restored \(it cannot be read \(no answer in 100 ms\)\); replaying the whole stream/));
    await feed.stop();
  });
});
