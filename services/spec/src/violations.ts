// Field paths as authors read them (`spec.create[2].inputs[0].name`) and the list of
// violations a validation pass collects.
import { fieldPath, type FieldViolation, type Path } from "@ephemera/kit/errors";

export { fieldPath, ROOT_FIELD, type Path } from "@ephemera/kit/errors";

/** Stable codes of the rules; docs/plugins.md lists what each one means. */
export const RULES = [
  "required", "type", "unknown-field", "name-format", "too-long", "version-format",
  "duplicate-step", "duplicate-input", "duplicate-output", "input-source", "unknown-step",
  "undeclared-output", "cycle", "create-refers-to-delete", "as-empty", "env-name", "reserved-env",
  "duplicate-env", "path-format", "duplicate-path", "script-shebang", "timeout-format",
  "timeout-range", "retries-range", "overlay-yaml", "overlay-shape", "overlay-restart-policy", "overlay-image",
  "overlay-namespace", "overlay-reserved-container", "duplicate-resource", "duplicate-local",
  "duplicate-endpoint", "duplicate-baseline", "duplicate-container", "env-value-conflict",
  "env-operation", "unknown-resource", "output-key-format", "ttl-duration", "ttl-offset-from",
  "port-range", "local-address", "endpoint-target", "too-many", "patch-type", "value-source",
  "unknown-fork", "fork-kind", "fork-expression", "duplicate-fork", "duplicate-virtual", "duplicate-workload", "utf8", "match-one", "match-depth",
  "script-or-command", "routing-context", "desired-pods-range", "pod-template",
] as const;
export type Rule = (typeof RULES)[number];

export class Violations {
  private readonly seen = new Set<string>();
  private readonly entries: { path: Path; violation: FieldViolation }[] = [];

  add(path: Path, rule: Rule, description: string): void {
    const field = fieldPath(path);
    const key = `${field}\u0000${rule}\u0000${description}`;
    if (this.seen.has(key)) return;
    this.seen.add(key);
    this.entries.push({ path, violation: { field, rule, description } });
  }

  get list(): FieldViolation[] {
    return this.entries.map((e) => e.violation);
  }

  /** In the order their fields appear in `doc` (missing fields after their siblings), so an author reads top to bottom. */
  ordered(doc: unknown): FieldViolation[] {
    const keyed = this.entries.map((e, i) => ({ ...e, rank: rankOf(doc, e.path), i }));
    keyed.sort((a, b) => compareRanks(a.rank, b.rank) || a.i - b.i);
    return keyed.map((e) => e.violation);
  }
}

function rankOf(doc: unknown, path: Path): number[] {
  const rank: number[] = [];
  let cur: unknown = doc;
  for (const seg of path) {
    if (typeof seg === "number") rank.push(seg);
    else {
      const keys = cur !== null && typeof cur === "object" && !Array.isArray(cur) ? Object.keys(cur) : [];
      const at = keys.indexOf(seg);
      rank.push(at < 0 ? Number.MAX_SAFE_INTEGER : at);
    }
    cur = cur !== null && typeof cur === "object" ? (cur as Record<string | number, unknown>)[seg] : undefined;
  }
  return rank;
}

function compareRanks(a: number[], b: number[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return a.length - b.length;
}
