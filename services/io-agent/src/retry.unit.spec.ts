// The agents' retry policy: only UNAVAILABLE is retried, backoff grows (jittered) up to its cap,
// and the whole thing ends within the policy's total time, every retry reported.
import { ConflictError, UnavailableError, ValidationError } from "@ephemera/kit";
import { withRetries, type RetryNotice } from "./retry.js";

const policy = { totalMs: 400, baseDelayMs: 10, maxDelayMs: 40 };

describe("retrying calls to the IO context", () => {
  it("retries UNAVAILABLE with growing, capped backoff until the call succeeds, reporting each retry", async () => {
    const notices: RetryNotice[] = [];
    let calls = 0;
    const result = await withRetries(async () => {
      if (++calls < 5) throw new UnavailableError("redis: cannot store outputs of r: Connection is closed.");
      return "stored";
    }, policy, (n) => notices.push(n));
    expect(result).toBe("stored");
    expect(notices.map((n) => n.attempt)).toEqual([2, 3, 4, 5]);
    for (const n of notices) expect(n.delayMs).toBeGreaterThan(0);
    for (const n of notices) expect(n.delayMs).toBeLessThanOrEqual(policy.maxDelayMs);
    expect(notices.every((n) => n.error.includes("Connection is closed"))).toBe(true);
  });

  it("gives up with the last error once the total time is spent, never running past it", async () => {
    const started = Date.now();
    const remaining: number[] = [];
    const err = await withRetries(async (remainingMs) => {
      remaining.push(remainingMs);
      throw new UnavailableError("still down");
    }, policy).catch((e: unknown) => e);
    const tookMs = Date.now() - started;
    expect(err).toEqual(new UnavailableError("still down"));
    expect(tookMs).toBeLessThanOrEqual(policy.totalMs + 150); // timers run late on a busy machine
    expect(tookMs).toBeGreaterThanOrEqual(policy.totalMs - 2 * policy.maxDelayMs);
    // Each attempt is told how much time is left, so its deadline never passes the bound.
    expect(remaining).toEqual([...remaining].sort((a, b) => b - a));
    expect(remaining.at(-1)!).toBeLessThanOrEqual(policy.maxDelayMs * 2);
  });

  it("does not retry answers that a retry cannot change", async () => {
    for (const e of [new ValidationError([]), new ConflictError("not produced"), new Error("internal")]) {
      let calls = 0;
      await expect(withRetries(async () => { calls++; throw e; }, policy)).rejects.toBe(e);
      expect(calls).toBe(1);
    }
  });

  it("stops retrying once its signal aborts", async () => {
    const stop = new AbortController();
    let calls = 0;
    await expect(withRetries(async () => {
      if (++calls === 3) stop.abort();
      throw new UnavailableError("down");
    }, policy, undefined, stop.signal)).rejects.toBeInstanceOf(UnavailableError);
    expect(calls).toBe(3);
  });
});
