// CLI templating of plugin and sandbox files, as upstream's CLI does it: the file is parsed
// as YAML first, then `@{var}` and `@{embed: path}` are substituted in string values only
// (never in keys). `yaml` and `binary` encodings replace a whole string value. Files and
// embedded text are read as bytes and must be UTF-8 (utf8.ts): nothing is rewritten.
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { VAR_NAME } from "./names.js";
import { LONE_SURROGATE, badBytes, decodeFile, where } from "./utf8.js";
import { fieldPath, type Path } from "./violations.js";

export interface TemplateProblem {
  /** Field path in the file, or "" for a problem of the command line. */
  field: string;
  message: string;
}

export class TemplateError extends Error {
  constructor(
    message: string,
    readonly problems: TemplateProblem[] = [],
    readonly file?: string,
  ) {
    super(message);
    this.name = "TemplateError";
  }

  static of(file: string, problems: TemplateProblem[]): TemplateError {
    const lines = problems.map((p) => (p.field ? `${file}: ${p.field}: ${p.message}` : `${file}: ${p.message}`));
    return new TemplateError(lines.join("\n"), problems, file);
  }
}

export interface RenderOptions {
  /** Directory `@{embed: path}` is relative to: the template file's directory. */
  baseDir: string;
  vars: Map<string, string>;
  readFile?: (path: string) => Buffer;
  /** Named in error messages. */
  file?: string;
}

/** Parses repeated `--set name=value` (split at the first '='). Setting a name twice with different values is an error. */
export function parseSets(sets: string[]): Map<string, string> {
  const vars = new Map<string, string>();
  const problems: TemplateProblem[] = [];
  for (const set of sets) {
    const eq = set.indexOf("=");
    if (eq < 0) {
      problems.push({ field: "", message: `--set ${JSON.stringify(set)} must be NAME=VALUE` });
      continue;
    }
    const [name, value] = [set.slice(0, eq), set.slice(eq + 1)];
    if (!VAR_NAME.test(name)) {
      problems.push({ field: "", message: `--set ${JSON.stringify(set)}: variable name "${name}" must match ${VAR_NAME.source}` });
      continue;
    }
    const earlier = vars.get(name);
    if (earlier !== undefined && earlier !== value) {
      problems.push({ field: "", message: `--set ${name} is given twice with different values (${JSON.stringify(earlier)} and ${JSON.stringify(value)})` });
      continue;
    }
    if (LONE_SURROGATE.test(value)) {
      problems.push({ field: "", message: `--set ${name}: the value holds a lone surrogate, which UTF-8 cannot carry` });
      continue;
    }
    vars.set(name, value);
  }
  if (problems.length > 0) throw TemplateError.of("--set", problems);
  return vars;
}

/** Reads FILE ("-" = stdin), parses YAML, applies @{var} (from `--set k=v` strings) and @{embed: path}. */
export async function loadTemplate(
  file: string,
  sets: string[],
  opts: { stdin?: () => Promise<Uint8Array>; onlyName?: boolean } = {},
): Promise<unknown> {
  const vars = parseSets(sets);
  const label = file === "-" ? "standard input" : file;
  const text = decodeFile(file === "-" ? await (opts.stdin ?? readStdin)() : await readFile(file), label);
  const baseDir = file === "-" ? process.cwd() : dirname(resolve(file));
  const doc = parseFile(text, label);
  const options: RenderOptions = { baseDir, vars, file: label };
  if (opts.onlyName) {
    // `delete -f` needs the name only: leave the rest as written, so its variables need no value.
    if (doc === null || typeof doc !== "object" || Array.isArray(doc) || !("name" in doc)) return doc;
    return { ...doc, name: renderAt((doc as { name: unknown }).name, ["name"], options) };
  }
  return renderTemplate(doc, options);
}

/** Substitutes every directive in the string values of `doc`; throws one TemplateError listing every problem. */
export function renderTemplate(doc: unknown, opts: RenderOptions): unknown {
  return renderAt(doc, [], opts);
}

function renderAt(doc: unknown, at: Path, opts: RenderOptions): unknown {
  const ctx: Context = { opts, problems: [], unset: new Map() };
  const out = walk(doc, at, ctx);
  if (ctx.unset.size > 0) {
    const names = [...ctx.unset].map(([name, fields]) => `${name} (at ${fields.join(", ")})`);
    ctx.problems.push({
      field: "",
      message: `variables without a value: ${names.join("; ")}; give each with --set NAME=VALUE`,
    });
  }
  if (ctx.problems.length > 0) throw TemplateError.of(opts.file ?? "template", ctx.problems);
  return out;
}

interface Context {
  opts: RenderOptions;
  problems: TemplateProblem[];
  unset: Map<string, string[]>;
}

function walk(value: unknown, at: Path, ctx: Context): unknown {
  if (typeof value === "string") return renderString(value, at, ctx);
  if (Array.isArray(value)) return value.map((v, i) => walk(v, [...at, i], ctx));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, walk(v, [...at, k], ctx)]));
  }
  return value;
}

type Encoding = "raw" | "yaml" | "binary";
type Directive =
  | { op: "var"; name: string; encoding: Encoding }
  | { op: "embed"; path: string; encoding: Encoding };

const EMBED = /^\s*embed\s*(?:\[([^\]]*)\])?\s*:\s*(.*?)\s*$/s;
const VAR = /^\s*([^\s[\]:]+)\s*(?:\[([^\]]*)\])?\s*$/;
const OPERATION = /^\s*([^\s[\]:]+)\s*(?:\[[^\]]*\])?\s*:/;

function renderString(s: string, at: Path, ctx: Context): unknown {
  if (!s.includes("@{")) return s;
  const field = fieldPath(at);
  const problem = (message: string) => ctx.problems.push({ field, message });
  let out = "";
  let pos = 0;
  for (;;) {
    const start = s.indexOf("@{", pos);
    if (start < 0) break;
    const end = s.indexOf("}", start + 2);
    if (end < 0) {
      problem(`"@{" at offset ${start} has no closing "}"`);
      return s;
    }
    out += s.slice(pos, start);
    pos = end + 1;
    const text = s.slice(start, end + 1);
    const directive = parseDirective(s.slice(start + 2, end), problem);
    if (!directive) continue;
    const whole = s.trim() === text;
    if (directive.encoding !== "raw" && !whole) {
      problem(`${text}: the ${directive.encoding} encoding must be the whole value, not part of a larger string`);
      continue;
    }
    const content = resolveContent(directive, text, field, ctx, problem);
    if (content === undefined) continue;
    if (directive.encoding === "binary") return Buffer.from(content).toString("base64");
    if (directive.encoding === "yaml") {
      try {
        return parseYaml(Buffer.from(content).toString("utf8"));
      } catch (err) {
        problem(`${text}: content is not valid YAML: ${firstLine(err)}`);
        continue;
      }
    }
    out += typeof content === "string" ? content : Buffer.from(content).toString("utf8");
  }
  return out + s.slice(pos);
}

function parseDirective(body: string, problem: (m: string) => void): Directive | undefined {
  const embed = EMBED.exec(body);
  if (embed) {
    const encoding = encodingOf(embed[1], body, problem);
    const path = embed[2] ?? "";
    if (path === "") {
      problem(`@{${body}}: embed needs a file path, e.g. @{embed: ./script.sh}`);
      return undefined;
    }
    return encoding && { op: "embed", path, encoding };
  }
  const variable = VAR.exec(body);
  if (variable) {
    const name = variable[1] ?? "";
    if (name === "embed") {
      problem(`@{${body}}: embed needs a file path, e.g. @{embed: ./script.sh}`);
      return undefined;
    }
    if (!VAR_NAME.test(name)) {
      problem(`@{${body}}: "${name}" is not a variable name (${VAR_NAME.source})`);
      return undefined;
    }
    const encoding = encodingOf(variable[2], body, problem);
    return encoding && { op: "var", name, encoding };
  }
  const op = OPERATION.exec(body)?.[1];
  problem(op
    ? `@{${body}}: unsupported operation "${op}" (supported: @{name} and @{embed: path})`
    : `@{${body}}: unsupported directive (supported: @{name} and @{embed: path})`);
  return undefined;
}

function encodingOf(raw: string | undefined, body: string, problem: (m: string) => void): Encoding | undefined {
  const encoding = raw?.trim() ?? "raw";
  if (encoding === "raw" || encoding === "yaml" || encoding === "binary") return encoding;
  problem(`@{${body}}: unsupported encoding "${encoding}" (use raw, yaml or binary)`);
  return undefined;
}

function resolveContent(d: Directive, text: string, field: string, ctx: Context, problem: (m: string) => void): string | Buffer | undefined {
  if (d.op === "var") {
    const value = ctx.opts.vars.get(d.name);
    if (value === undefined) {
      const fields = ctx.unset.get(d.name) ?? [];
      if (!fields.includes(field)) fields.push(field);
      ctx.unset.set(d.name, fields);
    }
    return value;
  }
  const path = resolve(ctx.opts.baseDir, d.path);
  let content: Buffer;
  try {
    content = (ctx.opts.readFile ?? readFileSync)(path);
  } catch (err) {
    problem(`${text}: cannot read ${path}: ${firstLine(err)}`);
    return undefined;
  }
  // Binary content is carried as base64; text goes into a string value as it is.
  const bad = d.encoding === "binary" ? undefined : badBytes(content)[0];
  if (!bad) return content;
  problem(`${text}: ${path} is not valid UTF-8: ${where(bad)}`);
  return undefined;
}

function parseFile(text: string, label: string): unknown {
  const docs = parseAllDocuments(text);
  if (docs.length > 1) throw TemplateError.of(label, [{ field: "", message: `holds ${docs.length} YAML documents; expected one` }]);
  const doc = docs[0];
  if (!doc) return null;
  const error = doc.errors[0];
  if (error) throw TemplateError.of(label, [{ field: "", message: `is not valid YAML: ${firstLine(error)}` }]);
  try {
    return doc.toJS();
  } catch (err) {
    throw TemplateError.of(label, [{ field: "", message: `is not valid YAML: ${firstLine(err)}` }]);
  }
}

function firstLine(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return message.split("\n")[0] ?? message;
}

async function readStdin(): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
