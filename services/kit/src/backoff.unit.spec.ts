// The one retry policy: delays grow from about the first one to the cap and never past it,
// start over after a reset, differ between two loops (jitter), and bad bounds are refused.
import { Backoff } from "./backoff.js";

const delays = (b: Backoff, n: number) => Array.from({ length: n }, () => b.next());

describe("Backoff", () => {
  it("grows from about the first delay to the cap, never past it", () => {
    const b = new Backoff({ firstMs: 250, maxMs: 5000 });
    const ds = delays(b, 40);
    for (const d of ds) expect(d).toBeGreaterThan(0);
    for (const d of ds) expect(d).toBeLessThanOrEqual(5000);
    expect(ds[0]!).toBeLessThan(1000);
    // Decorrelated jitter reaches the cap and stays near it: the later delays are long.
    expect(Math.min(...ds.slice(20))).toBeGreaterThan(1000);
  });

  it("starts over from the first delay after a reset", () => {
    const b = new Backoff({ firstMs: 100, maxMs: 10_000 });
    delays(b, 30);
    b.reset();
    expect(b.next()).toBeLessThan(400);
  });

  it("gives two loops different delays, so replicas that failed together do not retry together", () => {
    const a = delays(new Backoff({ firstMs: 250, maxMs: 5000 }), 5);
    const b = delays(new Backoff({ firstMs: 250, maxMs: 5000 }), 5);
    expect(a).not.toEqual(b);
  });

  it("refuses bounds that make no backoff, naming the field", () => {
    expect(() => new Backoff({ firstMs: 0, maxMs: 10 })).toThrow(/firstMs must be a number > 0/);
    expect(() => new Backoff({ firstMs: 100, maxMs: 10 })).toThrow(/maxMs must be ≥ firstMs 100/);
  });
});
