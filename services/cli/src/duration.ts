// Durations on the command line (`--wait-timeout 90s`, `3m`, `1h`, `1m30s`).
import { durationLimitText } from "@ephemera/spec/names";
import { UsageError } from "./errors.js";

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Parses a duration such as "90s", "3m", "1h" or "1m30s"; undefined when malformed. */
export function parseDuration(text: string): number | undefined {
  const trimmed = text.trim();
  if (!/^(\d+(\.\d+)?(ms|s|m|h))+$/.test(trimmed)) return undefined;
  let total = 0;
  for (const [, amount, , unit] of trimmed.matchAll(/(\d+(\.\d+)?)(ms|s|m|h)/g)) {
    total += Number(amount) * UNIT_MS[unit!]!;
  }
  return total > 0 ? Math.round(total) : undefined;
}

/** The value of a duration flag in ms, at most `maxMs`: a usage error (exit 2) naming the flag otherwise. */
export function durationFlag(flag: string, text: string, maxMs: number): number {
  const ms = parseDuration(text);
  if (ms === undefined) throw new UsageError(`${flag}: "${text}" is not a duration such as 90s, 3m or 1h`);
  if (ms > maxMs) throw new UsageError(`${flag}: "${text}" is longer than the ${durationLimitText(maxMs)} limit`);
  return ms;
}
