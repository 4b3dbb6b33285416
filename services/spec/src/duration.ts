// Durations written in files (`ttl.duration: 2d`, a step's `timeout: 10m`), in
// milliseconds. The validator has checked their shape; `ms` does the arithmetic.
import ms from "ms";

/** Milliseconds of a duration such as "90s", "10m", "2d", "1w"; undefined when empty or malformed. */
export function durationMs(text: string | undefined): number | undefined {
  if (!text) return undefined;
  const value = ms(text as ms.StringValue);
  return Number.isFinite(value) && value > 0 ? value : undefined;
}
