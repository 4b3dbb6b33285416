import { AggregateCache, type CachedAggregate } from "./aggregates.js";

const held = (revision: number, bytes = 10): CachedAggregate => ({ revision, version: revision, events: [], bytes });

describe("AggregateCache", () => {
  it("keeps at most its number of aggregates, dropping the least recently used", () => {
    const cache = new AggregateCache({ aggregates: 2 });
    cache.set("a", held(1));
    cache.set("b", held(2));
    expect(cache.get("a")?.revision).toBe(1);
    cache.set("c", held(3));
    expect(cache.get("b")).toBeUndefined();
    expect([cache.get("a")?.revision, cache.get("c")?.revision]).toEqual([1, 3]);
    expect(cache.size).toBe(2);
  });

  it("keeps at most its bytes, and never an aggregate larger than all of them", () => {
    const cache = new AggregateCache({ bytes: 100 });
    cache.set("a", held(1, 60));
    cache.set("b", held(2, 60));
    expect(cache.get("a")).toBeUndefined();
    expect(cache.get("b")?.revision).toBe(2);
    cache.set("huge", held(3, 101));
    expect(cache.get("huge")).toBeUndefined();
    // Replacing an aggregate counts its new size only.
    cache.set("b", held(4, 90));
    cache.set("c", held(5, 10));
    expect([cache.get("b")?.revision, cache.get("c")?.revision]).toEqual([4, 5]);
  });

  it("does not go back to an older revision of an aggregate (two reads racing)", () => {
    const cache = new AggregateCache();
    cache.set("a", held(5));
    cache.set("a", held(3));
    expect(cache.get("a")?.revision).toBe(5);
    cache.delete("a");
    cache.set("a", held(3));
    expect(cache.get("a")?.revision).toBe(3);
  });

  it("keeps nothing when bounded to no aggregates", () => {
    const cache = new AggregateCache({ aggregates: 0 });
    cache.set("a", held(1));
    expect(cache.get("a")).toBeUndefined();
  });
});
