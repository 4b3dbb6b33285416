// A feed on the real event store: a fold that throws stops it loudly, at start and live.
import type { NatsConnection } from "@nats-io/nats-core";
import { connectNats } from "./connection.js";
import { JetStreamEventStore } from "./jetstream.js";
import { Feed, Projection, ProjectionFaultError } from "./projection.js";
import { NO_AGGREGATE } from "./types.js";
import { testNats } from "../../../test/support/servers.js";

describe("Feed on JetStream with a fold that throws", () => {
  const meta = { source: "test" };
  let nc: NatsConnection;
  let store: JetStreamEventStore;
  let cleanup: (nc: NatsConnection) => Promise<void>;
  const counting = () => new Projection<number>("c", () => 0, (n, e) => {
    if (e.type === "bad") throw new Error("cannot fold bad");
    return n + 1;
  });

  beforeEach(async () => {
    const t = testNats("fold");
    cleanup = t.cleanup;
    nc = await connectNats(t.url, "fold");
    store = await JetStreamEventStore.open(nc, { prefix: t.prefix });
  });
  afterEach(async () => { await cleanup(nc); await nc.close(); });

  it("rejects start with the event that could not be folded, and a fresh feed meets it again", async () => {
    const a = await store.append("c", "x", NO_AGGREGATE, [{ type: "ok", data: {} }], meta);
    const b = await store.append("c", "x", a, [{ type: "bad", data: {} }], meta);
    await store.append("c", "y", NO_AGGREGATE, [{ type: "ok", data: {} }], meta);
    for (let i = 0; i < 2; i++) {
      const counts = counting();
      const feed = new Feed(store, [counts]);
      await expect(feed.start()).rejects.toMatchObject({ name: "ProjectionFaultError", subject: "x", position: b.revision, type: "bad" });
      expect({ healthy: feed.healthy, position: feed.position, y: counts.get("y") }).toEqual({ healthy: false, position: a.revision, y: undefined });
      await feed.stop();
    }
  });

  it("live: the feed turns unhealthy at the commit and its waiters hear why", async () => {
    const feed = new Feed(store, [counting()]);
    await feed.start();
    const a = await store.append("c", "x", NO_AGGREGATE, [{ type: "bad", data: {} }], meta);
    await expect(feed.waitFor(a.revision, 5000)).rejects.toBeInstanceOf(ProjectionFaultError);
    expect(feed.healthy).toBe(false);
    await feed.stop();
  });
});
