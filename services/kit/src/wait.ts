// Waiting for a condition with a deadline, instead of sleeping and hoping.
import { Backoff } from "./backoff.js";
import { longTimeout } from "./timers.js";

export class DeadlineError extends Error {
  override readonly name = "DeadlineError";
}

export interface WaitOptions {
  timeoutMs?: number;
  intervalMs?: number;
  /** What is being waited for, for the error message. */
  what?: string;
}

export async function waitFor<T>(
  probe: () => T | undefined | false | null | Promise<T | undefined | false | null>,
  { timeoutMs = 10_000, intervalMs = 25, what = "condition" }: WaitOptions = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== false && v !== null) return v;
    } catch (e) {
      lastError = e;
    }
    if (Date.now() >= deadline) {
      throw new DeadlineError(`timed out after ${timeoutMs} ms waiting for ${what}`, { cause: lastError });
    }
    await delay(intervalMs);
  }
}

/** Resolves after `ms` (any length: see longTimeout), or at once when `signal` aborts. */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    // The listener goes when the timer fires: a loop's long-lived signal would otherwise gather one per wait.
    const abort = () => { t.clear(); resolve(); };
    const t = longTimeout(() => { signal?.removeEventListener("abort", abort); resolve(); }, ms);
    signal?.addEventListener("abort", abort, { once: true });
  });
}

/**
 * Runs `fn` while it throws a retryable error, waiting a Backoff (baseMs up to maxMs, with
 * jitter) between attempts; `retryable` hears the delay the next attempt would wait.
 */
export async function retry<T>(
  fn: (attempt: number) => Promise<T>,
  { attempts = 5, baseMs = 20, maxMs = 1000, retryable = (_e: unknown, _delayMs: number) => true } = {},
): Promise<T> {
  const backoff = new Backoff({ firstMs: baseMs, maxMs });
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (e) {
      if (attempt >= attempts) throw e;
      const delayMs = backoff.next();
      if (!retryable(e, delayMs)) throw e;
      await delay(delayMs);
    }
  }
}
