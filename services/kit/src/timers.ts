// Timers: one that may be longer than setTimeout holds, and the due-time index: when each
// aggregate's next timer fires. The index's times live in events (a retry's `retryAt`, a
// run's start and deadline), so it is rebuilt from the projections at start; its one
// setTimeout only wakes the service up.

/** The longest delay one setTimeout holds (2^31-1 ms, 24.8 days); past it Node fires after 1 ms. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

export interface LongTimeout {
  /** Cancels it; nothing fires afterwards. */
  clear(): void;
  /** Lets the process exit while it waits (as Timeout.unref). */
  unref(): LongTimeout;
}

/**
 * setTimeout for any delay: past MAX_TIMER_MS it waits in links of at most that long, so a
 * 1000 h step deadline fires after 1000 h. An infinite delay never fires; a negative or
 * NaN one fires on the next turn, as setTimeout's does.
 */
export function longTimeout(fire: () => void, ms: number): LongTimeout {
  let timer: NodeJS.Timeout | undefined;
  let unref = false;
  const wait = (left: number) => {
    const link = Math.min(left, MAX_TIMER_MS);
    timer = setTimeout(() => (left > link ? wait(left - link) : fire()), link);
    if (unref) timer.unref();
  };
  wait(Number.isNaN(ms) ? 0 : Math.max(0, ms));
  const handle: LongTimeout = {
    clear: () => { clearTimeout(timer); timer = undefined; },
    unref: () => { unref = true; timer?.unref(); return handle; },
  };
  return handle;
}

export class DueIndex {
  private readonly due = new Map<string, number>();
  private timer?: NodeJS.Timeout;
  private armedFor = Infinity;
  private stopped = false;
  private paused = false;
  private firing = false;

  constructor(
    private readonly fire: (ids: string[], now: number) => Promise<void>,
    private readonly now: () => number = Date.now,
    /** Never sleep longer than this (clocks drift; a missed wake-up costs at most this). */
    private readonly maxSleepMs = 30_000,
  ) {}

  /** Sets (or clears, with undefined) the next due time of `id`. */
  set(id: string, at: number | undefined): void {
    if (at === undefined) this.due.delete(id);
    else this.due.set(id, at);
    if (at !== undefined && at < this.armedFor && !this.paused) this.arm();
  }

  /** The ids due now or earlier. */
  dueNow(): string[] {
    const now = this.now();
    return [...this.due].filter(([, at]) => at <= now).map(([id]) => id);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /**
   * Keeps the index but fires nothing until arm() (a replica that does not hold its timers'
   * lease). A firing under way finishes; its commands are idempotent.
   */
  pause(): void {
    this.paused = true;
    clearTimeout(this.timer);
    this.armedFor = Infinity;
  }

  /** Fires what is due now at once, then each id when it comes due (resumes a paused index). */
  arm(): void {
    this.paused = false;
    if (this.stopped || this.firing) return;
    clearTimeout(this.timer);
    const next = Math.min(...this.due.values());
    if (!Number.isFinite(next)) { this.armedFor = Infinity; return; }
    this.armedFor = next;
    this.timer = setTimeout(() => void this.tick(), Math.min(this.maxSleepMs, Math.max(0, next - this.now())));
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    this.armedFor = Infinity;
    const ids = this.dueNow();
    this.firing = true;
    try {
      // Handled ids set their new due time (or none) through set(); a failure leaves it due.
      if (ids.length) await this.fire(ids, this.now());
    } finally {
      this.firing = false;
      if (!this.paused && ids.some((id) => (this.due.get(id) ?? Infinity) <= this.now())) {
        // Still due after firing (the command failed): try again a little later, not in a hot loop.
        for (const id of ids) if ((this.due.get(id) ?? Infinity) <= this.now()) this.due.set(id, this.now() + 1000);
      }
      // Paused meanwhile (the lease was lost): the index waits for arm().
      if (!this.paused) this.arm();
    }
  }
}
