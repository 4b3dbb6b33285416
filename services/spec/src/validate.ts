// Validation of plugin and sandbox documents, and the conversions between a document and
// its proto message. The CLI validates the templated file; the sandbox service validates
// `pluginToDoc(request)`; both get the same violations from the same rules.
import { createHash } from "node:crypto";
import { ValidationError, type FieldViolation } from "@ephemera/kit/errors";
import * as pb from "@ephemera/proto";
import type * as z from "zod";
import { reportIssues } from "./issues.js";
import { PluginDoc, SandboxDoc } from "./model.js";
import { checkPluginRules } from "./plugin-rules.js";
import { checkSandboxRules } from "./sandbox-rules.js";
import { RouteGroupDoc, checkRouteGroupRules } from "./routegroup.js";
import { JobDoc, JobRunnerGroupDoc, checkJobRules, checkJobRunnerGroupRules } from "./jobs.js";
import { LONE_SURROGATE } from "./utf8.js";
import { Violations, type Path } from "./violations.js";

export { checkSandboxAgainstPlugins } from "./sandbox-rules.js";
export { parsePluginRef, canonicalVersion, type PluginRef } from "./refs.js";
export { stepEnvName } from "./names.js";
export { stepDependencies } from "./graph.js";

/** Told about what a file has that is accepted but ignored (printed by the CLI on stderr). */
export type WarningSink = (message: string) => void;

/** Every violation of a plugin document; empty when it is valid. */
export function pluginViolations(doc: unknown, warn?: WarningSink): FieldViolation[] {
  return check(tolerated(doc, "plugin", warn), PluginDoc, checkPluginRules, "plugin").violations;
}

/** Every violation of a sandbox document; empty when it is valid. */
export function sandboxViolations(doc: unknown, warn?: WarningSink): FieldViolation[] {
  return check(tolerated(doc, "sandbox", warn), SandboxDoc, checkSandboxRules, "sandbox").violations;
}

/** Validates a plugin document (the YAML file's shape, already templated, or `pluginToDoc` of a proto). Throws ValidationError listing every violation. */
export function validatePlugin(doc: unknown, warn?: WarningSink): pb.ResourcePlugin {
  const { value, violations } = check(tolerated(doc, "plugin", warn), PluginDoc, checkPluginRules, "plugin");
  if (violations.length > 0) throw new ValidationError(violations, "invalid plugin");
  return pb.ResourcePlugin.fromJSON(value);
}

/** Validates a sandbox document. Throws ValidationError listing every violation. */
export function validateSandbox(doc: unknown, warn?: WarningSink): pb.Sandbox {
  const { value, violations } = check(tolerated(doc, "sandbox", warn), SandboxDoc, checkSandboxRules, "sandbox");
  if (violations.length > 0) throw new ValidationError(violations, "invalid sandbox");
  return pb.Sandbox.fromJSON(value);
}

/** Every violation of a route group document; empty when it is valid. */
export function routeGroupViolations(doc: unknown): FieldViolation[] {
  return check(tolerated(doc, "route group"), RouteGroupDoc, checkRouteGroupRules, "route group").violations;
}

/** Validates a route group document. Throws ValidationError listing every violation. */
export function validateRouteGroup(doc: unknown): pb.RouteGroup {
  const { value, violations } = check(tolerated(doc, "route group"), RouteGroupDoc, checkRouteGroupRules, "route group");
  if (violations.length > 0) throw new ValidationError(violations, "invalid route group");
  return pb.RouteGroup.fromJSON(value);
}

export const routeGroupToDoc = (g: pb.RouteGroup): unknown => pb.RouteGroup.toJSON(g);

/** Every violation of a job runner group document; empty when it is valid. */
export function jobRunnerGroupViolations(doc: unknown): FieldViolation[] {
  return check(tolerated(doc, "job runner group"), JobRunnerGroupDoc, checkJobRunnerGroupRules, "job runner group").violations;
}

/**
 * Validates a job runner group document. Throws ValidationError listing every violation.
 * The pod template travels as JSON text; a group without `scaling` keeps one pod.
 */
export function validateJobRunnerGroup(doc: unknown): pb.JobRunnerGroup {
  const { value, violations } = check(tolerated(doc, "job runner group"), JobRunnerGroupDoc, checkJobRunnerGroupRules, "job runner group");
  if (violations.length > 0) throw new ValidationError(violations, "invalid job runner group");
  const { spec } = value as z.infer<typeof JobRunnerGroupDoc>;
  const group = pb.JobRunnerGroup.fromJSON({ ...(value as object), spec: { ...spec, podTemplate: undefined, scaling: undefined } });
  group.spec!.podTemplate = spec.podTemplate === undefined ? "" : JSON.stringify(spec.podTemplate);
  group.spec!.scaling = { manual: { desiredPods: spec.scaling?.manual.desiredPods ?? 1 } };
  return group;
}

/** The file-shaped object of a runner group: its pod template as an object again. */
export function jobRunnerGroupToDoc(g: pb.JobRunnerGroup): unknown {
  const doc = pb.JobRunnerGroup.toJSON(g) as { spec?: Record<string, unknown> };
  if (doc.spec && g.spec?.podTemplate) doc.spec.podTemplate = JSON.parse(g.spec.podTemplate) as unknown;
  return doc;
}

/** Every violation of a job document; empty when it is valid. */
export function jobViolations(doc: unknown): FieldViolation[] {
  return check(tolerated(doc, "job"), JobDoc, checkJobRules, "job").violations;
}

/** Validates a job document (its name is generated at submit). Throws ValidationError listing every violation. */
export function validateJob(doc: unknown): pb.Job {
  const { value, violations } = check(tolerated(doc, "job"), JobDoc, checkJobRules, "job");
  if (violations.length > 0) throw new ValidationError(violations, "invalid job");
  return pb.Job.fromJSON(value);
}

/** The file-shaped object of a job (its name too, once generated). */
export const jobToDoc = (j: pb.Job): unknown => pb.Job.toJSON(j);

/** The file-shaped plain object of a plugin (canonical proto3 JSON: field names equal the YAML keys). */
export function pluginToDoc(p: pb.ResourcePlugin): unknown {
  return pb.ResourcePlugin.toJSON(p);
}

export function sandboxToDoc(s: pb.Sandbox): unknown {
  return pb.Sandbox.toJSON(s);
}

/** sha256 of the canonical JSON of a plugin spec (equal specs have equal digests). */
export function pluginDigest(spec: pb.ResourcePluginSpec): string {
  return createHash("sha256").update(canonicalJson(pb.ResourcePluginSpec.toJSON(spec))).digest("hex");
}

/** JSON with object keys sorted at every level, so equal values serialise equally. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v === null || typeof v !== "object" || Array.isArray(v)) return v;
    return Object.fromEntries(Object.keys(v).sort().map((k) => [k, (v as Record<string, unknown>)[k]]));
  });
}

/**
 * What upstream's decoder tolerates, removed before validation: a field written `null`
 * (Go reads it as absent; `signadot sandbox get -o yaml` prints `endpoints: null`), and a
 * stray top-level `version:` in a plugin file (upstream ignores it; the version is part of
 * `name`), which is reported to `warn`.
 */
function tolerated(doc: unknown, what: "plugin" | "sandbox" | "route group" | "job runner group" | "job", warn?: WarningSink): unknown {
  const cleaned = withoutNulls(doc);
  if (what !== "plugin" || cleaned === null || typeof cleaned !== "object" || Array.isArray(cleaned) || !("version" in cleaned)) return cleaned;
  const { version, ...rest } = cleaned as Record<string, unknown>;
  warn?.(`top-level "version: ${String(version)}" is ignored: a plugin's version is part of its name (name@1.2.3)`);
  return rest;
}

/** Maps of the user's own keys keep their null entries: a param without a value stays an error. */
const FREE_MAPS = new Set(["params", "labels", "meta", "podTemplate"]);

function withoutNulls(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(withoutNulls);
  if (v === null || typeof v !== "object") return v;
  return Object.fromEntries(Object.entries(v).filter(([, x]) => x !== null)
    .map(([k, x]) => [k, FREE_MAPS.has(k) ? x : withoutNulls(x)]));
}

function check(
  doc: unknown, schema: z.ZodType, rules: (doc: unknown, out: Violations) => void, what: string,
): { value: unknown; violations: FieldViolation[] } {
  const out = new Violations();
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) {
    out.add([], "type", `a ${what} file is a mapping with ${what === "job" ? "a" : "name and"} spec, not ${doc === null || doc === undefined ? "empty" : Array.isArray(doc) ? "a list" : typeof doc}`);
    return { value: undefined, violations: out.list };
  }
  const parsed = schema.safeParse(doc);
  if (!parsed.success) reportIssues(parsed.error.issues, doc, schema, out);
  rules(doc, out);
  textUtf8CannotCarry(doc, [], out);
  return { value: parsed.success ? parsed.data : undefined, violations: out.ordered(doc) };
}

/** Strings (keys too) UTF-8 cannot carry: encoding them for the wire would rewrite them to U+FFFD. */
function textUtf8CannotCarry(value: unknown, at: Path, out: Violations): void {
  if (typeof value === "string") {
    if (!LONE_SURROGATE.test(value)) return;
    out.add(at, "utf8", "holds a lone surrogate (e.g. a \"\\uD800\" escape without its pair), which UTF-8 cannot carry");
  } else if (Array.isArray(value)) value.forEach((v, i) => textUtf8CannotCarry(v, [...at, i], out));
  else if (value !== null && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) {
      if (LONE_SURROGATE.test(k)) out.add([...at, k], "utf8", "the key holds a lone surrogate, which UTF-8 cannot carry");
      textUtf8CannotCarry(v, [...at, k], out);
    }
  }
}
