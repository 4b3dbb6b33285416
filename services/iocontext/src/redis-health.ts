// Whether the IO context's Redis can answer now, known without waiting on a command: the
// connection's state, and a heartbeat (PING) that finds a server stalled behind an open
// connection. Redis is a cache of the output journal: while it is down a call is refused
// at once (its caller goes to the journal) instead of waiting for a command timeout or a
// reconnection, and calls already waiting on it when it goes are failed at once too.
import type { Redis } from "ioredis";
import type { Logger } from "@ephemera/kit";
import { Counter, type Registry } from "@ephemera/kit/metrics";

export interface RedisHealthOptions {
  /** How often a PING is sent while the connection is up. */
  heartbeatMs?: number;
  /** A PING unanswered this long means the server stalled: Redis counts as down until it answers. */
  heartbeatTimeoutMs?: number;
  /** Told when Redis goes and comes back (once each). */
  logger?: Logger;
  /** Counts the calls by outcome (`ephemera_iocontext_redis_calls_total`). */
  metrics?: Registry;
}

/** What became of a call: answered (`ok`, `error`), given up on when Redis went while it waited, or not sent. */
type CallOutcome = "ok" | "error" | "abandoned" | "refused";

export const DEFAULT_REDIS_HEARTBEAT = { heartbeatMs: 500, heartbeatTimeoutMs: 1_000 } as const;

/** Refused without asking Redis: it is known to be down. Carries no command or argument. */
export class RedisDownError extends Error {
  override readonly name = "RedisDownError";
}

/** The connection states of a client that never had a connection yet: its first attempt may still succeed. */
const FIRST_CONNECT = new Set(["wait", "connecting", "connect"]);

export class RedisHealth {
  private stalled = false;
  private everReady: boolean;
  private pinging = false;
  private wasDown = false;
  /** Calls waiting on Redis, failed at once when it goes. */
  private readonly waiting = new Set<(err: Error) => void>();
  private readonly timer: NodeJS.Timeout;
  private readonly options: Required<Omit<RedisHealthOptions, "logger" | "metrics">> & { logger?: Logger };
  private readonly calls?: Counter<"outcome">;

  constructor(private readonly redis: Redis, options: RedisHealthOptions = {}) {
    const { metrics, ...rest } = options;
    this.options = { ...DEFAULT_REDIS_HEARTBEAT, ...rest };
    if (metrics) {
      this.calls = new Counter({
        name: "ephemera_iocontext_redis_calls_total", labelNames: ["outcome"], registers: [metrics],
        help: "IO-context calls on Redis by outcome: answered (ok, error), given up when Redis went while waiting (abandoned), "
          + "not sent as Redis was down (refused)",
      });
    }
    this.everReady = redis.status === "ready";
    redis.on("ready", this.onReady);
    redis.on("close", this.onClose);
    this.timer = setInterval(() => this.heartbeat(), this.options.heartbeatMs);
    this.timer.unref();
  }

  /**
   * Whether a command may be sent: the connection is ready and answered its last PING in
   * time. Before the first connection, the first attempt is waited for (within the
   * client's timeouts), so a call made as the service starts is not refused for nothing.
   */
  get up(): boolean {
    if (this.stalled) return false;
    const status = this.redis.status;
    return status === "ready" || (!this.everReady && FIRST_CONNECT.has(status));
  }

  /** Runs `command` unless Redis is known to be down; fails at once if Redis goes while it waits. */
  async call<T>(command: () => Promise<T>): Promise<T> {
    if (!this.up) {
      this.count("refused");
      throw new RedisDownError(this.why());
    }
    let fail!: (err: Error) => void;
    const gone = new Promise<never>((_, reject) => { fail = reject; });
    this.waiting.add(fail);
    let outcome: CallOutcome = "abandoned";
    const pending = command().then(
      (value) => { outcome = "ok"; return value; },
      (err: unknown) => { outcome = "error"; throw err; },
    );
    // Left behind if Redis goes first: it settles (or times out) later, unobserved.
    pending.catch(() => undefined);
    try {
      return await Promise.race([pending, gone]);
    } finally {
      this.waiting.delete(fail);
      this.count(outcome);
    }
  }

  stop(): void {
    clearInterval(this.timer);
    this.redis.off("ready", this.onReady);
    this.redis.off("close", this.onClose);
  }

  private count(outcome: CallOutcome): void {
    this.calls?.inc({ outcome });
  }

  private why(): string {
    return this.stalled
      ? `redis is not answering (no reply to PING within ${this.options.heartbeatTimeoutMs} ms)`
      : `redis is not connected (${this.redis.status})`;
  }

  private readonly onReady = () => {
    this.everReady = true;
    this.stalled = false;
    this.back();
  };

  private readonly onClose = () => this.down();

  /** One PING at a time: while one is unanswered (a stalled server), none piles up behind it. */
  private heartbeat(): void {
    if (this.pinging || this.redis.status !== "ready") return;
    this.pinging = true;
    const late = setTimeout(() => {
      this.stalled = true;
      this.down();
    }, this.options.heartbeatTimeoutMs);
    late.unref();
    this.redis.ping().then(
      () => {
        this.stalled = false;
        if (this.up) this.back();
      },
      () => undefined, // the connection's own events say what happened
    ).finally(() => {
      clearTimeout(late);
      this.pinging = false;
    });
  }

  private down(): void {
    const err = new RedisDownError(this.why());
    for (const fail of this.waiting) fail(err);
    this.waiting.clear();
    if (this.wasDown) return;
    this.wasDown = true;
    this.options.logger?.warn({ reason: err.message }, "redis is down: outputs are served from the journal and not cached until it is back");
  }

  private back(): void {
    if (!this.wasDown) return;
    this.wasDown = false;
    this.options.logger?.info("redis is back: outputs are cached again");
  }
}
