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

describe("Feed", () => {
  it("follows again from the last applied commit when a waiter finds it stuck", async () => {
    const store = new SilentOnce();
    const counts = new Projection<number>("c", () => 0, (n) => n + 1);
    const feed = new Feed(store, [counts]);
    await feed.start();
    const a = await store.append("c", "x", NO_AGGREGATE, [{ type: "t", data: {} }], { source: "test" });
    await feed.waitFor(a.revision, 1000);
    const b = await store.append("c", "x", a, [{ type: "t", data: {} }], { source: "test" });
    await expect(feed.waitFor(b.revision, 200)).rejects.toBeInstanceOf(UnavailableError);
    await feed.waitFor(b.revision, 2000);
    expect(store.follows).toBe(2);
    expect(counts.get("x")!.state).toBe(2);
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
