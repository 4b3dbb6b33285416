// The one loop every JetStream consumer here lives in: (re)create the consumer, read until it
// fails or its messages end, say so in the connection's health, and create it again with
// backoff until stopped.
import { Backoff, delay, type BackoffBounds } from "@ephemera/kit";
import type { NatsHealth } from "./health.js";

/** A consumer re-created after a failure: 250 ms growing to 5 s, jittered (replicas do not come back in lockstep). */
export const REOPEN_BACKOFF: BackoffBounds = { firstMs: 250, maxMs: 5000 };

export interface ReopenOptions {
  /** How the health and the logs name it. */
  name: string;
  /** Told while it re-creates its consumer; absent: not reported. */
  health?: NatsHealth;
  /** A failure it does not come back from: `done` rejects with it. Absent: every failure is ridden out. */
  final?: (err: unknown, at: { opened: boolean; failures: number }) => boolean;
  backoff?: BackoffBounds;
}

/**
 * Runs `session` (create the consumer, call `reading()` once it reads, consume until its
 * messages end or it throws) again and again until `stop()`. A session that ends while not
 * stopped is an interruption: reported, then retried after the backoff.
 */
export class ConsumerLoop {
  readonly done: Promise<void>;
  private stopped = false;
  private opened = false;
  private readonly wake = new AbortController();
  private readonly backoff: Backoff;

  constructor(private readonly options: ReopenOptions, session: (loop: ConsumerLoop) => Promise<void>) {
    this.backoff = new Backoff(options.backoff ?? REOPEN_BACKOFF);
    // Started a tick later: a session may use the loop (its `stopping`) before the constructor returned.
    this.done = Promise.resolve().then(() => this.run(session));
    this.done.catch(() => undefined);
  }

  /** Stop was asked: a session ends its reading and returns. */
  get stopping(): boolean {
    return this.stopped;
  }

  /** The consumer reads: healthy again, and the next failure backs off from the start. */
  reading(): void {
    this.opened = true;
    this.backoff.reset();
    this.options.health?.restore(this.options.name);
  }

  /** No session starts after this; a backoff under way is cut short. The caller closes what the session reads. */
  stop(): void {
    this.stopped = true;
    this.wake.abort();
  }

  private async run(session: (loop: ConsumerLoop) => Promise<void>): Promise<void> {
    const { name, health, final } = this.options;
    try {
      for (let failures = 0; !this.stopped; failures++) {
        try {
          await session(this);
          if (this.stopped) return;
          health?.interrupt(name, new Error("the consumer's messages ended"));
        } catch (err) {
          if (this.stopped) return;
          if (final?.(err, { opened: this.opened, failures })) throw err;
          health?.interrupt(name, err);
        }
        await delay(this.backoff.next(), this.wake.signal);
      }
    } finally {
      health?.forget(name);
    }
  }
}
