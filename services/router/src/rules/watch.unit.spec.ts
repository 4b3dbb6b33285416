import { backoffDelay, DEFAULT_BACKOFF } from "./watch.js";

describe("backoffDelay", () => {
  const policy = { baseMs: 250, maxMs: 10_000 };

  it("doubles from the base up to the cap", () => {
    const ceiling = (failures: number) => backoffDelay(failures, policy, () => 1);
    expect([0, 1, 2, 3, 4, 5, 6, 7].map(ceiling)).toEqual([250, 500, 1000, 2000, 4000, 8000, 10_000, 10_000]);
    expect(ceiling(1_000)).toBe(10_000);
  });

  it("waits between half of it and all of it, by the random draw", () => {
    expect(backoffDelay(2, policy, () => 0)).toBe(500);
    expect(backoffDelay(2, policy, () => 0.5)).toBe(750);
    expect(backoffDelay(2, policy, () => 0.999)).toBeLessThanOrEqual(1000);
  });

  it("comes back within 10 s by default", () => {
    expect(backoffDelay(50, DEFAULT_BACKOFF, () => 1)).toBe(10_000);
  });
});
