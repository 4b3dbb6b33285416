// Calls to the IO context are retried while it answers UNAVAILABLE (its Redis or NATS is
// down, or it restarts), with exponential backoff (jittered: agents of many sandboxes do not retry together) bounded in total time, each retry
// reported. Any other answer is final: retrying cannot change it.
import { UnavailableError, errorMessage, retry } from "@ephemera/kit";

export interface RetryPolicy {
  /** No retry starts later than this after the first attempt, and no attempt runs past it. */
  totalMs: number;
  /** The typical first backoff, growing (with jitter) after each retry up to maxDelayMs. */
  baseDelayMs: number;
  maxDelayMs: number;
}

/** Rides out an outage of up to about a minute; a 20-second one costs at most ~5 s after it ends. */
export const DEFAULT_RETRY: RetryPolicy = { totalMs: 60_000, baseDelayMs: 250, maxDelayMs: 5_000 };

/** What a retry reports: the error's message only (answers of the IO context carry names, never values). */
export interface RetryNotice {
  attempt: number;
  delayMs: number;
  elapsedMs: number;
  error: string;
}

/** Runs `attempt(remainingMs)` until it succeeds, fails for good, the policy's time is up, or `signal` aborts. */
export function withRetries<T>(
  attempt: (remainingMs: number) => Promise<T>,
  policy: RetryPolicy = DEFAULT_RETRY,
  onRetry: (notice: RetryNotice) => void = () => undefined,
  signal?: AbortSignal,
): Promise<T> {
  const started = Date.now();
  const deadline = started + policy.totalMs;
  let attempts = 0;
  return retry(
    (n) => { attempts = n; return attempt(Math.max(1, deadline - Date.now())); },
    {
      attempts: Number.POSITIVE_INFINITY,
      baseMs: policy.baseDelayMs,
      maxMs: policy.maxDelayMs,
      retryable: (err, delayMs) => {
        if (!(err instanceof UnavailableError) || signal?.aborted) return false;
        if (Date.now() + delayMs >= deadline) return false;
        onRetry({ attempt: attempts + 1, delayMs, elapsedMs: Date.now() - started, error: errorMessage(err) });
        return true;
      },
    },
  );
}
