// The due-time index: when each aggregate's next timer fires. The times themselves live in
// events (a retry's `retryAt`, a run's start and deadline), so the index is rebuilt from the
// projections at start; the one setTimeout here only wakes the service up.

export class DueIndex {
  private readonly due = new Map<string, number>();
  private timer?: NodeJS.Timeout;
  private armedFor = Infinity;
  private stopped = false;
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
    if (at !== undefined && at < this.armedFor) this.arm();
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

  arm(): void {
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
      if (ids.some((id) => (this.due.get(id) ?? Infinity) <= this.now())) {
        // Still due after firing (the command failed): try again a little later, not in a hot loop.
        for (const id of ids) if ((this.due.get(id) ?? Infinity) <= this.now()) this.due.set(id, this.now() + 1000);
      }
      this.arm();
    }
  }
}
