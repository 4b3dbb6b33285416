// The delays of a loop that retries: exponential, with decorrelated jitter, between the call
// site's first and largest delay. Jitter keeps replicas that failed together from retrying
// together (a NATS node restarting would otherwise see every replica's consumers come back
// in the same instant, each time).
import { ExponentialBackoff, decorrelatedJitterGenerator, type IBackoff } from "cockatiel";

export interface BackoffBounds {
  /** The typical first delay, in ms (> 0). */
  firstMs: number;
  /** No delay is longer (≥ firstMs). */
  maxMs: number;
}

/** One loop's delays: `next()` before each retry, `reset()` once it works again. */
export class Backoff {
  private readonly factory: ExponentialBackoff<unknown>;
  private current: IBackoff<unknown> | undefined;

  constructor(readonly bounds: BackoffBounds) {
    if (!(bounds.firstMs > 0)) throw new RangeError(`backoff firstMs must be a number > 0 (got ${bounds.firstMs})`);
    if (!(bounds.maxMs >= bounds.firstMs)) throw new RangeError(`backoff maxMs must be ≥ firstMs ${bounds.firstMs} (got ${bounds.maxMs})`);
    this.factory = new ExponentialBackoff({ generator: decorrelatedJitterGenerator, initialDelay: bounds.firstMs, maxDelay: bounds.maxMs });
  }

  /** The delay before the next attempt, in ms: grows (with jitter) up to maxMs. */
  next(): number {
    this.current = this.current ? this.current.next(undefined) : this.factory.next();
    return this.current.duration;
  }

  /** The loop works again: the next failure starts from the first delay. */
  reset(): void {
    this.current = undefined;
  }
}
