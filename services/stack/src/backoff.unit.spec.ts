import { DEFAULT_BACKOFF, nextRestart } from "./backoff.js";

describe("restart backoff", () => {
  const short = 1000;

  it("doubles from 250 ms with each consecutive short run, up to 10 s", () => {
    const delays: number[] = [];
    let attempt = 0;
    for (let i = 0; i < 9; i++) {
      const next = nextRestart(attempt, short, DEFAULT_BACKOFF);
      expect(next.attempt).toBe(i + 1);
      attempt = next.attempt;
      delays.push(next.delayMs);
    }
    expect(delays).toEqual([250, 500, 1000, 2000, 4000, 8000, 10_000, 10_000, 10_000]);
    expect(nextRestart(5000, short, DEFAULT_BACKOFF).delayMs).toBe(10_000);
  });

  it("starts again from the first delay after a run of 30 s or more", () => {
    expect(nextRestart(7, 30_000, DEFAULT_BACKOFF)).toEqual({ attempt: 1, delayMs: 250 });
    expect(nextRestart(7, 29_999, DEFAULT_BACKOFF)).toEqual({ attempt: 8, delayMs: 10_000 });
  });
});
