import { UnavailableError, type Logger } from "@ephemera/kit";
import { InMemoryEventStore } from "./memory.js";
import { Feed, Projection, ProjectionFaultError } from "./projection.js";
import { NO_AGGREGATE, type CommitHandler, type FollowOptions, type Subscription } from "./types.js";

/** A store whose first follow goes silent after one commit, as an ordered consumer lost in a server restart does. */
class SilentOnce extends InMemoryEventStore {
  follows = 0;
  override follow(options: FollowOptions, handler: CommitHandler): Subscription {
    const n = ++this.follows;
    let seen = 0;
    return super.follow(options, (c) => (n === 1 && ++seen > 1 ? undefined : handler(c)));
  }
}

/** A store that delivers one commit to the first follow and nothing to any other, as a server that stays away. */
class AlwaysSilent extends InMemoryEventStore {
  follows = 0;
  override follow(options: FollowOptions, handler: CommitHandler): Subscription {
    const n = ++this.follows;
    let seen = 0;
    return super.follow(options, (c) => (n > 1 || ++seen > 1 ? undefined : handler(c)));
  }
}

/** A store whose first follow goes silent after one commit of its replay and never says it caught up. */
class SilentInReplay extends SilentOnce {
  override follow(options: FollowOptions, handler: CommitHandler): Subscription {
    const sub = super.follow(options, handler);
    return this.follows === 1 ? { ...sub, caughtUp: new Promise<void>(() => undefined) } : sub;
  }
}

/** A feed of one counting projection that applied a first commit, and a second commit appended after it. */
async function followedThenAppended(store: InMemoryEventStore) {
  const counts = new Projection<number>("c", () => 0, (n) => n + 1);
  const feed = new Feed(store, [counts]);
  await feed.start();
  const a = await store.append("c", "x", NO_AGGREGATE, [{ type: "t", data: {} }], { source: "test" });
  await feed.waitFor(a.revision, 1000);
  const b = await store.append("c", "x", a, [{ type: "t", data: {} }], { source: "test" });
  return { counts, feed, b };
}

describe("Feed", () => {
  it("follows again from the last applied commit once a waiter finds it stuck for a second, well before the waiter's deadline", async () => {
    const store = new SilentOnce();
    const { counts, feed, b } = await followedThenAppended(store);
    // Without the resync this waits the whole 30 s and rejects (past the test's own timeout).
    await feed.waitFor(b.revision, 30_000);
    expect(store.follows).toBe(2);
    expect(counts.get("x")!.state).toBe(2);
    await feed.stop();
  }, 20_000);

  it("starts when its first follow goes silent part way through the replay: the stream's end at start is reached by following again", async () => {
    const store = new SilentInReplay();
    let v = NO_AGGREGATE;
    for (let i = 0; i < 3; i++) v = await store.append("c", "x", v, [{ type: "t", data: {} }], { source: "test" });
    const counts = new Projection<number>("c", () => 0, (n) => n + 1);
    const feed = new Feed(store, [counts]);
    // Without reaching the end by position, start() waits for ever on the silent consumer.
    await feed.start();
    expect(store.follows).toBe(2);
    expect(counts.get("x")!.state).toBe(3);
    await feed.stop();
  }, 20_000);

  it("rejects a waiter at its deadline when following again does not help", async () => {
    const store = new AlwaysSilent();
    const { counts, feed, b } = await followedThenAppended(store);
    await expect(feed.waitFor(b.revision, 3000)).rejects.toBeInstanceOf(UnavailableError);
    expect(counts.get("x")!.state).toBe(1);
    // It was followed again (more than once) before the deadline.
    expect(store.follows).toBeGreaterThanOrEqual(3);
    await feed.stop();
  });
});

describe("Feed with a fold that throws", () => {
  const meta = { source: "test" };
  /** Counts events; throws on the type `bad`, as a fold meeting an event it cannot fold does. */
  const counting = () => new Projection<number>("c", () => 0, (n, e) => {
    if (e.type === "bad") throw new Error("cannot fold bad");
    return n + 1;
  });
  const recording = () => {
    const lines: Array<{ level: string; fields: Record<string, unknown>; msg: string }> = [];
    const at = (level: string) => (fields: Record<string, unknown>, msg: string) => { lines.push({ level, fields, msg }); };
    const logger = { trace: at("trace"), debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error"), fatal: at("fatal") };
    return { logger: logger as unknown as Logger, lines };
  };

  it("fails start when replay meets it, naming the event, and applies nothing after it", async () => {
    const store = new InMemoryEventStore();
    const a = await store.append("c", "x", NO_AGGREGATE, [{ type: "ok", data: {} }], meta);
    const b = await store.append("c", "x", a, [{ type: "bad", data: {} }], meta);
    await store.append("c", "y", NO_AGGREGATE, [{ type: "ok", data: {} }], meta);
    const counts = counting();
    const { logger, lines } = recording();
    const feed = new Feed(store, [counts], logger);

    const started = feed.start();
    await expect(started).rejects.toBeInstanceOf(ProjectionFaultError);
    await expect(started).rejects.toMatchObject({ aggregate: "c", subject: "x", position: b.revision, type: "bad", retryable: false });
    expect({ healthy: feed.healthy, position: feed.position, x: counts.get("x")?.state, y: counts.get("y") }).toEqual({ healthy: false, position: a.revision, x: 1, y: undefined });
    expect(lines.filter((l) => l.level === "error").map((l) => ({ type: l.fields["type"], subject: l.fields["subject"], position: l.fields["position"] })))
      .toEqual([{ type: "bad", subject: "x", position: b.revision }]);
    await feed.stop();
  });

  it("after start, turns unhealthy and rejects waiters with the fault instead of skipping the commit", async () => {
    const store = new InMemoryEventStore();
    const counts = counting();
    const feed = new Feed(store, [counts], recording().logger);
    const health: boolean[] = [];
    feed.onChange((h) => health.push(h));
    await feed.start();
    const a = await store.append("c", "x", NO_AGGREGATE, [{ type: "ok", data: {} }], meta);
    await feed.waitFor(a.revision, 1000);

    const b = await store.append("c", "x", a, [{ type: "bad", data: {} }], meta);
    await expect(feed.waitFor(b.revision, 1000)).rejects.toMatchObject({ name: "ProjectionFaultError", position: b.revision, type: "bad" });
    const c = await store.append("c", "y", NO_AGGREGATE, [{ type: "ok", data: {} }], meta);
    await expect(feed.waitFor(c.revision, 1000)).rejects.toBeInstanceOf(ProjectionFaultError);

    expect({ health, position: feed.position, y: counts.get("y") }).toEqual({ health: [false], position: a.revision, y: undefined });
    await feed.stop();
  });
});
