// Durations on the command line (`--wait-timeout 90s`, `3m`, `1h`, `1m30s`).

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
