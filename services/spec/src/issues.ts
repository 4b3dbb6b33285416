// Turns zod's issues into field violations an author can act on: a path into the file,
// a stable rule code, and words that say what to write instead.
import type * as z from "zod";
import type { Path, Rule, Violations } from "./violations.js";

export function reportIssues(issues: readonly z.core.$ZodIssue[], doc: unknown, schema: z.ZodType, out: Violations): void {
  for (const issue of issues) {
    const path = issue.path.map((seg) => (typeof seg === "symbol" ? String(seg) : seg));
    switch (issue.code) {
      case "unrecognized_keys": {
        const known = knownKeys(schema, path);
        for (const key of issue.keys) {
          const near = closest(key, known);
          const hint = near ? ` (did you mean "${near}"?)` : known.length ? ` (expected one of: ${known.join(", ")})` : "";
          out.add([...path, key], "unknown-field", `unknown field "${key}"${hint}`);
        }
        break;
      }
      case "invalid_type": {
        const value = valueAt(doc, path);
        if (value === undefined) out.add(path, "required", "is required");
        else out.add(path, "type", `must be ${expectedWords(issue.expected)}, not ${kindOf(value)}`);
        break;
      }
      case "invalid_union": {
        const expected = issue.errors.flatMap((branch) => branch.flatMap((i) => (i.code === "invalid_type" ? [expectedWords(i.expected)] : [])));
        const value = valueAt(doc, path);
        if (value === undefined) out.add(path, "required", "is required");
        else out.add(path, "type", `must be ${orList(expected.length ? expected : ["another type"])}, not ${kindOf(value)}`);
        break;
      }
      case "custom": {
        const rule = (issue.params as { rule?: Rule } | undefined)?.rule ?? "type";
        out.add(path, rule, issue.message);
        break;
      }
      default:
        out.add(path, "type", issue.message);
    }
  }
}

export function valueAt(doc: unknown, path: Path): unknown {
  let cur: unknown = doc;
  for (const seg of path) {
    if (cur === null || typeof cur !== "object" || !Object.hasOwn(cur, seg)) return undefined;
    cur = (cur as Record<string | number, unknown>)[seg];
  }
  return cur;
}

export function kindOf(v: unknown): string {
  if (v === null) return "null (an empty value)";
  if (Array.isArray(v)) return "a list";
  switch (typeof v) {
    case "string": return `a string ("${v.length > 40 ? v.slice(0, 40) + "…" : v}")`;
    case "number": return `a number (${v})`;
    case "boolean": return `a boolean (${v})`;
    case "object": return "a mapping";
    default: return typeof v;
  }
}

function expectedWords(expected: string): string {
  switch (expected) {
    case "object": case "record": case "map": return "a mapping";
    case "array": case "tuple": return "a list";
    case "int": return "a whole number";
    case "string": return "a string";
    case "number": return "a number";
    case "boolean": return "true or false";
    default: return expected;
  }
}

function orList(words: string[]): string {
  const unique = [...new Set(words)];
  return unique.length <= 1 ? (unique[0] ?? "") : `${unique.slice(0, -1).join(", ")} or ${unique.at(-1)}`;
}

/** The field names a strict object at `path` accepts (walks zod's definitions). */
function knownKeys(schema: z.ZodType, path: Path): string[] {
  let cur: z.core.$ZodType | undefined = unwrap(schema);
  for (const seg of path) {
    if (!cur) return [];
    const def = cur._zod.def as unknown as Record<string, unknown>;
    if (def.type === "object") {
      const shape = def.shape as Record<string, z.core.$ZodType>;
      cur = Object.hasOwn(shape, String(seg)) ? unwrap(shape[String(seg)]) : undefined;
    }
    else if (def.type === "array") cur = unwrap(def.element as z.core.$ZodType);
    else if (def.type === "record") cur = unwrap(def.valueType as z.core.$ZodType);
    else return [];
  }
  const def = cur?._zod.def as unknown as Record<string, unknown> | undefined;
  return def?.type === "object" ? Object.keys(def.shape as object) : [];
}

function unwrap(s: z.core.$ZodType | undefined): z.core.$ZodType | undefined {
  let cur = s;
  for (let i = 0; cur && i < 10; i++) {
    const def = cur._zod.def as unknown as Record<string, unknown>;
    if (def.type === "optional" || def.type === "nullable" || def.type === "default") cur = def.innerType as z.core.$ZodType;
    else if (def.type === "pipe") cur = def.in as z.core.$ZodType;
    else return cur;
  }
  return cur;
}

/** A known key within edit distance 2 of a misspelt one. */
function closest(key: string, known: string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = 3;
  for (const k of known) {
    const d = distance(key.toLowerCase(), k.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [k, d];
  }
  return best;
}

function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min((prev[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = row;
  }
  return prev[b.length] ?? 0;
}
