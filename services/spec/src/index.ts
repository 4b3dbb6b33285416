// The plugin and sandbox files: model, validation, templating. Shared by `cli` (fast
// feedback) and `sandbox` (the trust boundary): the same rules run in both.
export type { FieldViolation } from "@ephemera/kit/errors";
export {
  validatePlugin, validateSandbox, checkSandboxAgainstPlugins, pluginToDoc, sandboxToDoc,
  parsePluginRef, stepEnvName, stepDependencies, pluginDigest,
  pluginViolations, sandboxViolations, routeGroupViolations, validateRouteGroup, routeGroupToDoc,
  jobRunnerGroupViolations, validateJobRunnerGroup, jobRunnerGroupToDoc, jobViolations, validateJob, jobToDoc, canonicalVersion, canonicalJson, type PluginRef, type WarningSink,
} from "./validate.js";
export { loadTemplate, renderTemplate, parseSets, TemplateError, type TemplateProblem, type RenderOptions } from "./template.js";
export { jsonSchema, SCHEMA_KINDS, type SchemaKind } from "./schema.js";
/** Every rule code a violation can carry: stable, documented in docs/plugins.md. */
export { RULES, ROOT_FIELD, fieldPath, type Rule } from "./violations.js";
export { routeGroupMatches, MAX_MATCH_DEPTH } from "./routegroup.js";
