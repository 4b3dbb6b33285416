// Durations on the command line (`--wait-timeout 90s`, `logs --since 2d`): read by the one
// parser files and the services' variables use too (@ephemera/kit/duration).
import { checkDuration } from "@ephemera/kit/duration";
import { UsageError } from "./errors.js";

/** The value of a duration flag in ms, at most `maxMs`: a usage error (exit 2) naming the flag otherwise. */
export function durationFlag(flag: string, text: string, maxMs: number): number {
  const checked = checkDuration(text, { maxMs });
  if ("problem" in checked) throw new UsageError(`${flag}: "${text}" ${checked.problem}`);
  return checked.ms;
}
