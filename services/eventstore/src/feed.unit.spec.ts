import { UnavailableError } from "@ephemera/kit";
import { InMemoryEventStore } from "./memory.js";
import { Feed, Projection } from "./projection.js";
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
