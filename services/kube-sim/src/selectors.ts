// Label and field selectors as the API server reads them from `labelSelector` and
// `fieldSelector` (`a=b,c!=d,e in (x,y),!f,g`); pure, so list and watch share one matcher.
import { badRequest } from "./status.js";

type Obj = Record<string, unknown>;
export type Selector = (obj: Obj) => boolean;

type Term =
  | { op: "eq" | "ne"; key: string; value: string }
  | { op: "in" | "notin"; key: string; values: string[] }
  | { op: "exists" | "notexists"; key: string };

/** Splits on commas outside parentheses. */
function terms(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = "";
  for (const ch of text) {
    if (ch === "(") depth++;
    if (ch === ")") depth--;
    if (ch === "," && depth === 0) { out.push(cur); cur = ""; } else cur += ch;
  }
  out.push(cur);
  return out.map((s) => s.trim()).filter(Boolean);
}

function parseTerm(s: string): Term {
  let m = /^(\S+?)\s+(in|notin)\s*\(([^)]*)\)$/.exec(s);
  if (m) return { op: m[2] as "in" | "notin", key: m[1]!, values: m[3]!.split(",").map((v) => v.trim()) };
  m = /^([^=!\s]+)\s*(==|=|!=)\s*(.*)$/.exec(s);
  if (m) return { op: m[2] === "!=" ? "ne" : "eq", key: m[1]!, value: m[3]!.trim() };
  m = /^!\s*([^=!\s]+)$/.exec(s);
  if (m) return { op: "notexists", key: m[1]! };
  if (/^[^=!\s()]+$/.test(s)) return { op: "exists", key: s };
  throw badRequest(`unable to parse requirement: ${s}`);
}

function matches(term: Term, get: (key: string) => string | undefined): boolean {
  const v = get(term.key);
  switch (term.op) {
    case "eq": return v === term.value;
    case "ne": return v !== term.value;
    case "in": return v !== undefined && term.values.includes(v);
    case "notin": return v === undefined || !term.values.includes(v);
    case "exists": return v !== undefined;
    case "notexists": return v === undefined;
    default: { const never: never = term; return never; }
  }
}

export function labelSelector(text: string | null | undefined): Selector {
  const parsed = terms(text ?? "").map(parseTerm);
  return (obj) => {
    const labels = ((obj["metadata"] as Obj | undefined)?.["labels"] ?? {}) as Record<string, string>;
    return parsed.every((t) => matches(t, (k) => labels[k]));
  };
}

/** A field by dotted path (`metadata.name`, `status.phase`, `involvedObject.uid`), as a string. */
function field(obj: Obj, path: string): string {
  let cur: unknown = obj;
  for (const part of path.split(".")) cur = cur && typeof cur === "object" ? (cur as Obj)[part] : undefined;
  return cur === undefined || cur === null ? "" : String(cur);
}

export function fieldSelector(text: string | null | undefined): Selector {
  const parsed = terms(text ?? "").map(parseTerm);
  for (const t of parsed) if (t.op !== "eq" && t.op !== "ne") throw badRequest(`invalid field selector: ${t.key}: only =, == and != are supported`);
  return (obj) => parsed.every((t) => matches(t, (k) => field(obj, k)));
}

export const both = (a: Selector, b: Selector): Selector => (obj) => a(obj) && b(obj);
