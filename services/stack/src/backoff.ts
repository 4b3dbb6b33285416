// When to restart a service that died: exponential backoff that forgets after a good run.

export interface Backoff {
  /** Delay before the first restart after a short run. */
  initialMs: number;
  /** The delay doubles with each consecutive short run, up to this. */
  maxMs: number;
  /** A run at least this long counts as healthy: the next restart starts again at `initialMs`. */
  resetAfterMs: number;
}

export const DEFAULT_BACKOFF: Backoff = { initialMs: 250, maxMs: 10_000, resetAfterMs: 30_000 };

/**
 * The restart that follows a run of `upMs` that ended; `attempt` counts consecutive short
 * runs (0 before the first death).
 */
export function nextRestart(attempt: number, upMs: number, backoff: Backoff): { attempt: number; delayMs: number } {
  const next = upMs >= backoff.resetAfterMs ? 1 : attempt + 1;
  return { attempt: next, delayMs: Math.min(backoff.maxMs, backoff.initialMs * 2 ** (next - 1)) };
}
