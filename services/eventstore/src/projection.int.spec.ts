// A feed on the real event store: a fold that throws stops it loudly, at start and live.
import type { NatsConnection } from "@nats-io/nats-core";
import { connectNats } from "./connection.js";
import { jetstream } from "@nats-io/jetstream";
import { JetStreamEventStore, eventSubject } from "./jetstream.js";
import { Feed, Projection, ProjectionFaultError } from "./projection.js";
import { NO_AGGREGATE } from "./types.js";
import { testNats } from "../../../test/support/servers.js";

describe("Feed on JetStream with a fold that throws", () => {
  const meta = { source: "test" };
  let nc: NatsConnection;
  let store: JetStreamEventStore;
  let cleanup: (nc: NatsConnection) => Promise<void>;
  let prefix: string;
  const counting = () => new Projection<number>("c", () => 0, (n, e) => {
    if (e.type === "bad") throw new Error("cannot fold bad");
    return n + 1;
  });

  beforeEach(async () => {
    const t = testNats("fold");
    cleanup = t.cleanup;
    prefix = t.prefix;
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

  it("a commit whose events cannot be read stops a feed that takes its aggregate, loudly, and one that does not passes it by", async () => {
    const a = await store.append("c", "x", NO_AGGREGATE, [{ type: "ok", data: {} }], meta);
    // Not JSON: no writer of ephemera's makes such a commit; a feed must not skip it silently.
    const broken = await jetstream(nc).publish(eventSubject(prefix, "c", "x"), "{not json");
    const after = await store.append("d", "z", NO_AGGREGATE, [{ type: "ok", data: {} }], meta);
    const counts = counting();
    const taking = new Feed(store, [counts]);
    await expect(taking.start()).rejects.toMatchObject({ name: "ProjectionFaultError", subject: "x", position: broken.seq, type: "(events that cannot be read)" });
    expect({ healthy: taking.healthy, position: taking.position }).toEqual({ healthy: false, position: a.revision });
    await taking.stop();
    const others = new Projection<number>("d", () => 0, (n) => n + 1);
    const passing = new Feed(store, [others]);
    await passing.start();
    expect({ healthy: passing.healthy, position: passing.position, z: others.get("z")?.state }).toEqual({ healthy: true, position: after.revision, z: 1 });
    await passing.stop();
  });
});
