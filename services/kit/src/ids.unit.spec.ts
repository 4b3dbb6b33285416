import { decodeTime, isValid } from "ulid";
import { pooledRandom, ulidGen } from "./ids.js";

describe("pooledRandom", () => {
  it("asks its source once per pool of bytes, and gives each byte as a fraction of 256", () => {
    let calls = 0;
    const random = pooledRandom(4, (pool) => {
      calls++;
      pool.set([0, 64, 128, 255]);
    });
    expect([random(), random(), random(), random()]).toEqual([0, 0.25, 0.5, 255 / 256]);
    expect(calls).toBe(1);
    expect(random()).toBe(0);
    expect(calls).toBe(2);
  });
});

describe("ulidGen", () => {
  it("makes valid ids, in order, that differ within one millisecond", () => {
    const next = ulidGen();
    const before = Date.now();
    const ids = Array.from({ length: 1000 }, () => next());
    expect(ids.every((id) => isValid(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
    expect(decodeTime(ids[0]!)).toBeGreaterThanOrEqual(before);
  });

  it("draws the random part from the OS: two generators do not repeat each other", () => {
    const a = ulidGen()();
    const b = ulidGen()();
    expect(a.slice(10)).not.toEqual(b.slice(10));
  });
});
