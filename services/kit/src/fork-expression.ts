// `valueFrom.fork.expression`: the part of Go's text/template that Signadot documents for
// it, read without a template engine. Literal text, and actions `{{ .Service.Host }}` and
// `{{ .Service.Port }}` (spaces inside the braces free, Go's `{{- ` / ` -}}` trim markers and
// `{{/* comments */}}` as Go has them); anything else is refused with what is wrong, so the
// spec's validation refuses at plan time what the runner could not evaluate.

/** The fields an expression may read, as `.Service.<field>`. */
export const FORK_EXPRESSION_FIELDS = ["Host", "Port"] as const;
export type ForkExpressionField = (typeof FORK_EXPRESSION_FIELDS)[number];

/** Literal text, or the field an action reads. */
export type ForkExpressionPart = { text: string } | { field: ForkExpressionField };

export type ParsedForkExpression = { parts: ForkExpressionPart[] } | { problem: string };

const FIELD_CHAIN = /^(\.[A-Za-z_][A-Za-z0-9_]*)+$/;
const SPACE = /[ \t\r\n]/;
const isField = (f: string): f is ForkExpressionField => (FORK_EXPRESSION_FIELDS as readonly string[]).includes(f);
const READS = "an expression reads {{ .Service.Host }} and {{ .Service.Port }}";

/**
 * Pure: the parts of an expression, or the first problem in it. An empty expression is the
 * fork's Service host, as `{{ .Service.Host }}` (what a fork's `valueFrom.fork` gave before
 * expressions were evaluated).
 */
export function parseForkExpression(expression: string): ParsedForkExpression {
  if (expression === "") return { parts: [{ field: "Host" }] };
  const parts: ForkExpressionPart[] = [];
  let at = 0;
  let trimNext = false;
  while (at < expression.length) {
    const open = expression.indexOf("{{", at);
    let text = expression.slice(at, open < 0 ? undefined : open);
    if (trimNext) text = text.replace(/^[ \t\r\n]+/, "");
    if (open < 0) {
      if (text) parts.push({ text });
      break;
    }
    const close = expression.indexOf("}}", open + 2);
    if (close < 0) return { problem: `unclosed action: the "{{" at character ${open + 1} has no "}}"` };
    let inner = expression.slice(open + 2, close);
    // Go's trim markers: a dash next to the braces and a space trim the whitespace of the text on that side.
    const trimBefore = inner.length >= 2 && inner[0] === "-" && SPACE.test(inner[1]!);
    if (trimBefore) {
      text = text.replace(/[ \t\r\n]+$/, "");
      inner = inner.slice(2);
    }
    trimNext = inner.length >= 2 && inner[inner.length - 1] === "-" && SPACE.test(inner[inner.length - 2]!);
    if (trimNext) inner = inner.slice(0, -2);
    if (text) parts.push({ text });
    const action = expression.slice(open, close + 2);
    const problem = fieldOf(inner, action, parts);
    if (problem) return { problem };
    at = close + 2;
  }
  return { parts };
}

/** Adds what one action reads to `parts`; says what is wrong with it, if anything. */
function fieldOf(inner: string, action: string, parts: ForkExpressionPart[]): string | undefined {
  // A comment, as Go has it: right inside the braces (or the trim markers).
  if (inner.startsWith("/*") && inner.endsWith("*/") && inner.length >= 4) return undefined;
  const trimmed = inner.trim();
  if (trimmed === "") return `empty action ${action}: ${READS}`;
  if (!FIELD_CHAIN.test(trimmed)) {
    return `${action} is not supported: ${READS} (no functions, pipelines, variables or literals)`;
  }
  const [, service, field, ...rest] = trimmed.split(".");
  if (service !== "Service" || field === undefined || !isField(field) || rest.length > 0) {
    return `unknown field ${trimmed} in ${action}: ${READS}`;
  }
  parts.push({ field });
  return undefined;
}

/** Pure: the fields an expression's parts read. */
export const fieldsRead = (parts: ForkExpressionPart[]): Set<ForkExpressionField> =>
  new Set(parts.flatMap((p) => ("field" in p ? [p.field] : [])));

/** Pure: the value of parsed parts, given each field they read. */
export function renderForkExpression(parts: ForkExpressionPart[], values: Record<ForkExpressionField, string>): string {
  return parts.map((p) => ("field" in p ? values[p.field] : p.text)).join("");
}
