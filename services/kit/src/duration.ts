// Durations as people write them (`90s`, `10m`, `1h30m`, `2d`, `1w`), read the same way
// everywhere: plugin and sandbox files (a TTL, a step's timeout), eph's flags
// (`--wait-timeout`, `logs --since`) and the services' environment (EPHEMERA_LOG_RETENTION).

const DAY_MS = 86_400_000;

/** Each unit a duration may use, in milliseconds. */
export const DURATION_UNITS_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: DAY_MS, w: 7 * DAY_MS };

/** What an error suggests. */
export const DURATION_EXAMPLES = "90s, 10m, 1h30m, 2d or 1w";

const UNIT = "(?:ms|s|m|h|d|w)";
/**
 * What parseDuration accepts, as a pattern a JSON Schema can carry (no lookaround, no
 * ambiguous repetition): amounts with a unit, one after another, the first that is not
 * zero spelled so the pattern can tell (digits before a point, or after it).
 */
export const DURATION_PATTERN = new RegExp(
  `^(?:0+(?:\\.0+)?${UNIT})*(?:0*[1-9]\\d*(?:\\.\\d+)?|0+\\.0*[1-9]\\d*)${UNIT}(?:\\d+(?:\\.\\d+)?${UNIT})*$`,
);

const isDigit = (c: string | undefined) => c !== undefined && c >= "0" && c <= "9";

/**
 * Milliseconds of a duration: one or more amounts, each a whole or decimal number followed
 * by a unit (ms, s, m, h, d, w), with nothing between or around them, and not zero in all.
 * Rounded to the millisecond (at least 1); Infinity for amounts past what a number holds,
 * which every limit refuses. Undefined when malformed or zero.
 */
export function parseDuration(text: string): number | undefined {
  let total = 0;
  let nonZero = false;
  for (let i = 0; i < text.length;) {
    const start = i;
    while (isDigit(text[i])) i++;
    if (i === start) return undefined;
    if (text[i] === ".") {
      const point = ++i;
      while (isDigit(text[i])) i++;
      if (i === point) return undefined;
    }
    const amount = text.slice(start, i);
    const unit = text.startsWith("ms", i) ? "ms" : (text[i] ?? "");
    const size = Object.hasOwn(DURATION_UNITS_MS, unit) ? DURATION_UNITS_MS[unit]! : undefined;
    if (size === undefined) return undefined;
    i += unit.length;
    // Told from the digits: 0.000…1 of a unit underflows to 0 as a number, yet is not zero.
    nonZero ||= /[1-9]/.test(amount);
    total += Number(amount) * size;
  }
  return nonZero ? Math.max(1, Math.round(total)) : undefined;
}

export interface DurationLimits {
  maxMs: number;
  minMs?: number;
}

/** A limit as a message names it: `365-day`, `1-second`. */
export function durationLimitText(ms: number): string {
  if (ms % DAY_MS === 0) return `${ms / DAY_MS}-day`;
  return ms % 1000 === 0 ? `${ms / 1000}-second` : `${ms}-millisecond`;
}

/**
 * The milliseconds of `text` within `limits`, or why not, as a phrase that follows the
 * quoted text: `"soon" is not a duration such as …`, `"366d" is longer than the 365-day limit`.
 */
export function checkDuration(text: string, limits: DurationLimits): { ms: number } | { problem: string } {
  const ms = parseDuration(text);
  if (ms === undefined) {
    return { problem: `is not a duration such as ${DURATION_EXAMPLES} (numbers with a unit: ms, s, m, h, d or w)` };
  }
  if (ms > limits.maxMs) return { problem: `is longer than the ${durationLimitText(limits.maxMs)} limit` };
  if (limits.minMs !== undefined && ms < limits.minMs) return { problem: `is shorter than the ${durationLimitText(limits.minMs)} minimum` };
  return { ms };
}

/** A duration that is malformed or outside its limits; the message names where it was given. */
export class DurationError extends Error {
  override readonly name = "DurationError";
}

/** The milliseconds of `text` within `limits`, or a DurationError: `<what>: "<text>" <problem>`. */
export function requireDuration(what: string, text: string, limits: DurationLimits): number {
  const checked = checkDuration(text, limits);
  if ("problem" in checked) throw new DurationError(`${what}: "${text}" ${checked.problem}`);
  return checked.ms;
}
