// How times, durations and sizes read on the pages.

export function parseTime(value: string | undefined): number | undefined {
  if (!value) return undefined;
  const t = Date.parse(value);
  return Number.isNaN(t) ? undefined : t;
}

/** "3s", "4m 12s", "2h 5m", "3d 4h". */
export function duration(ms: number): string {
  if (ms < 0) ms = 0;
  const s = Math.floor(ms / 1000);
  if (s < 60) return ms < 10_000 ? `${(ms / 1000).toFixed(1)}s` : `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h}h ${m % 60}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

/** How long ago `value` was, e.g. "5m 3s"; "" without a time. */
export function age(value: string | undefined, now: number): string {
  const t = parseTime(value);
  return t === undefined ? "" : duration(now - t);
}

/** "in 2h 5m" or "5m ago". */
export function relative(value: string | undefined, now: number): string {
  const t = parseTime(value);
  if (t === undefined) return "";
  return t >= now ? `in ${duration(t - now)}` : `${duration(now - t)} ago`;
}

export function localTime(value: string | undefined): string {
  const t = parseTime(value);
  return t === undefined ? "" : new Date(t).toLocaleString();
}

export function bytes(n: number | string | undefined): string {
  const v = Number(n ?? 0);
  if (v < 1024) return `${v} B`;
  if (v < 1024 * 1024) return `${(v / 1024).toFixed(1)} KiB`;
  return `${(v / 1024 / 1024).toFixed(1)} MiB`;
}
