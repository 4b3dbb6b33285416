// The tables of `list` and `versions`, for people: aligned columns, timestamps to the
// second, versions newest first. No wire types and no YAML, so a table costs nothing to load.

/** Left-aligned columns, as kubectl prints them. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join("   ").trimEnd();
  return [header, ...rows].map(line).join("\n") + "\n";
}

/** Timestamps to the second: enough to tell versions and sandboxes apart in a table. */
export function shortTime(iso: string): string {
  return iso.replace(/\.\d+Z$/, "Z");
}

/** Semver precedence, newest first (numeric core; a pre-release sorts before its release). */
export function compareVersionsDesc(a: string, b: string): number {
  const parse = (v: string) => {
    const [core = "", pre] = v.split("+")[0]!.split(/-(.*)/s);
    return { core: core.split(".").map(Number), pre: pre ? pre.split(".") : [] };
  };
  const x = parse(a);
  const y = parse(b);
  for (let i = 0; i < 3; i++) {
    const d = (y.core[i] ?? 0) - (x.core[i] ?? 0);
    if (d) return d;
  }
  if (!x.pre.length || !y.pre.length) return x.pre.length - y.pre.length;
  for (let i = 0; i < Math.max(x.pre.length, y.pre.length); i++) {
    const p = x.pre[i];
    const q = y.pre[i];
    if (p === undefined) return 1;
    if (q === undefined) return -1;
    if (p === q) continue;
    const pn = /^\d+$/.test(p);
    const qn = /^\d+$/.test(q);
    if (pn && qn) return Number(q) - Number(p);
    if (pn !== qn) return pn ? 1 : -1;
    return q < p ? -1 : 1;
  }
  return 0;
}
