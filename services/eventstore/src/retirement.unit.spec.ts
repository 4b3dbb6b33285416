import { InMemoryEventStore } from "./memory.js";
import { Feed, Projection, execute } from "./projection.js";
import { NO_AGGREGATE, type Commit } from "./types.js";

/** Tallies per id; `closed` retires it, `opened` starts it over. */
interface Tally { n: number; closed: boolean }
const tallies = () => new Projection<Tally>(
  "tally", () => ({ n: 0, closed: false }),
  (s, e) => (e.type === "closed" ? { ...s, closed: true } : e.type === "opened" ? { n: 0, closed: false } : { ...s, n: s.n + 1 }),
  { retired: (s) => s.closed },
);
const meta = { source: "test" };
const commitOf = (position: number, types: string[], id = "x"): Commit => ({
  aggregate: "tally", aggregateId: id, position,
  events: types.map((type, i) => ({
    specversion: "1.0", id: `${position}-${i}`, type, source: "test", subject: id, time: "", datacontenttype: "application/json",
    data: {}, correlationId: "", causationId: "", sequence: position + i, aggregate: "tally", position,
  })),
});

describe("Projection: retired entities", () => {
  it("leave memory once retired; a later commit of the id folds as on a new entity", () => {
    const p = tallies();
    p.apply(commitOf(1, ["tick", "tick"]));
    p.apply(commitOf(2, ["tick"], "y"));
    expect(p.size).toBe(2);
    p.apply(commitOf(3, ["closed"]));
    expect({ size: p.size, x: p.get("x") }).toEqual({ size: 1, x: undefined });
    p.passed(3);
    p.apply(commitOf(4, ["opened", "tick"]));
    expect(p.get("x")).toEqual({ state: { n: 1, closed: false }, revision: 4, version: 5 });
  });

  it("a late delivery of a commit before the one that retired it re-creates nothing, until the feed has passed it", async () => {
    const store = new InMemoryEventStore();
    const p = tallies();
    const first = await store.append("tally", "x", NO_AGGREGATE, [{ type: "tick", data: {} }], meta);
    // The command applies its own commit at once: the projection has not seen the first one yet.
    p.apply(commitOf(first.revision, ["tick"]));
    const { entity } = await execute(store, p, "x", () => [{ type: "closed", data: {} }], meta);
    expect({ closed: entity.state.closed, held: p.get("x") }).toEqual({ closed: true, held: undefined });
    // The feed now delivers both, in order: neither makes an entity again.
    const feed = new Feed(store, [p]);
    const applied: number[] = [];
    feed.onCommit((c) => applied.push(c.position));
    await feed.start();
    expect({ applied, size: p.size, latest: p.latest("x") }).toEqual({ applied: [1, 2], size: 0, latest: undefined });
    await feed.stop();
  });

  it("a commit at or below the position the feed passed makes no entity of an id not held: the feed applied it already", () => {
    const p = tallies();
    p.apply(commitOf(2, ["closed"]));
    p.passed(2);
    expect(p.apply(commitOf(2, ["closed"]))).toBe(false);
    expect(p.apply(commitOf(1, ["tick"]))).toBe(false);
    expect(p.latest("x")).toBeUndefined();
  });

  it("execute returns the state its command made though the feed applied and retired it first", async () => {
    const store = new InMemoryEventStore();
    const p = tallies();
    const feed = new Feed(store, [p]);
    await feed.start();
    await execute(store, p, "x", () => [{ type: "tick", data: {} }], meta);
    // The feed delivers the closing commit (and passes it) before execute applies it itself.
    const delivered = new Promise<void>((resolve) => feed.onCommit((c) => { if (c.position === 2) resolve(); }));
    const closing = execute(store, p, "x", () => [{ type: "closed", data: {} }], meta);
    await delivered;
    const { entity } = await closing;
    expect({ state: entity.state, revision: entity.revision, held: p.latest("x") }).toEqual({ state: { n: 1, closed: true }, revision: 2, held: undefined });
    await feed.stop();
  });

  it("execute on a retired id reads the aggregate from the store and appends after its last commit", async () => {
    const store = new InMemoryEventStore();
    const p = tallies();
    await execute(store, p, "x", () => [{ type: "tick", data: {} }, { type: "closed", data: {} }], meta);
    p.passed(await store.position());
    expect(p.latest("x")).toBeUndefined();
    const { entity, appended } = await execute(store, p, "x", (s) => (s.closed ? [{ type: "opened", data: {} }] : []), meta);
    expect({ state: entity.state, version: appended?.version, held: p.get("x")?.state }).toEqual({
      state: { n: 0, closed: false }, version: 3, held: { n: 0, closed: false },
    });
  });

  it("read folds a retired aggregate from the store on demand and keeps it out of memory", async () => {
    const store = new InMemoryEventStore();
    const p = tallies();
    await execute(store, p, "x", () => [{ type: "tick", data: {} }, { type: "closed", data: {} }], meta);
    p.passed(await store.position());
    expect((await p.read(store, "x")).state).toEqual({ n: 1, closed: true });
    expect(p.size).toBe(0);
  });

  it("retire takes a live entity out; a snapshot image carries tombstones the feed has not passed", () => {
    const p = tallies();
    p.apply(commitOf(1, ["tick"]));
    p.apply(commitOf(2, ["tick"], "y"));
    p.retire("x");
    expect(p.image()).toEqual({
      entities: [["y", { state: { n: 1, closed: false }, revision: 2, version: 2 }]],
      tombstones: [["x", { state: { n: 1, closed: false }, revision: 1, version: 1 }]],
    });
    p.passed(2);
    expect(p.image().tombstones).toEqual([]);
  });
});
