// The shape of plugin and sandbox files as zod schemas: every field, unknown fields
// rejected, and the rules that concern one field alone. Rules across fields live in
// plugin-rules.ts and sandbox-rules.ts. The same schemas produce the JSON Schemas.
import * as z from "zod";
import { parseForkExpression } from "@ephemera/kit/fork-expression";
import { FORK_KINDS, isForkKind } from "@ephemera/kit/fork-name";
import {
  byteLength, CLUSTER_NAME, ENV_NAME, ENV_OPERATIONS, isReservedEnv, LABEL_NAME, MAX_BYTES, MAX_COUNT, MAX_RETRIES, STEP_NAME,
  PATCH_TYPES, TTL_OFFSETS, WORKLOAD_ENV_NAME, MAX_DURATION_MS, durationLimitWords,
} from "./names.js";
import { DURATION_PATTERN, checkDuration, parseDuration } from "@ephemera/kit/duration";
import { checkPath } from "./paths.js";
import { pluginRefProblems } from "./refs.js";
import type { Rule } from "./violations.js";

const OURS = "(ephemera addition)";

/** A custom issue carrying the rule's stable code. */
export function broken(rule: Rule, message: (value: string) => string) {
  return { error: (iss: { input: unknown }) => message(String(iss.input)), params: { rule } };
}

/** A string field. Empty counts as absent: proto3 JSON cannot tell them apart. */
export function text(description: string, required: boolean) {
  const s = z.string().meta({ description });
  return required ? s.refine((v) => v !== "", broken("required", () => "is required")) : s;
}

export function named(what: string, re: RegExp, maxBytes: number, patternInWords: string, description: string) {
  return text(description, true)
    .refine((v) => v === "" || re.test(v), broken("name-format", (v) => `${what} "${v}" ${patternInWords}`))
    .refine((v) => byteLength(v) <= maxBytes, broken("too-long", () => `${what} is longer than ${maxBytes} bytes`))
    .meta({ pattern: re.source, maxLength: maxBytes });
}

export const LABEL_RULE = "must start with a letter, contain only letters, digits and '-', and end with a letter or digit";
const STEP_RULE = "must start with a letter and contain only letters, digits, '_' and '-' (no dots)";

const stepName = (what: string, description: string) => named(what, STEP_NAME, MAX_BYTES.stepName, STEP_RULE, description);

export const maxBytes = (s: z.ZodString, max: number, what: string) =>
  s.refine((v) => byteLength(v) <= max, broken("too-long", (v) => `${what} is ${byteLength(v)} bytes, over the ${max}-byte limit`)).meta({ maxLength: max });

/** At most `max` entries, or the list is refused with its size and the limit. */
export const atMost = <T extends z.ZodArray<z.ZodType>>(list: T, max: number, what: string) =>
  list.refine((a) => a.length <= max, { error: (iss: { input: unknown }) => `${(iss.input as unknown[]).length} ${what}, more than the ${max} allowed`, params: { rule: "too-many" } })
    .meta({ maxItems: max });

export const atMostKeys = <T extends z.ZodType>(rec: T, max: number, what: string) =>
  rec.refine((r) => Object.keys(r as object).length <= max, {
    error: (iss: { input: unknown }) => `${Object.keys(iss.input as object).length} ${what}, more than the ${max} allowed`, params: { rule: "too-many" },
  });

export function filePath(description: string, required: boolean) {
  return text(description, required)
    .superRefine((v, ctx) => {
      const problem = v === "" ? undefined : checkPath(v);
      if (problem) ctx.addIssue({ code: "custom", message: `path "${v}" ${problem}`, params: { rule: "path-format" }, input: v });
    })
    .meta({ pattern: "^/" });
}

/**
 * A duration of at most `maxMs`, in the one grammar of @ephemera/kit/duration (eph's flags
 * and the services' variables read theirs with it too): a malformed one breaks `formatRule`,
 * one too long `rangeRule`. The JSON Schemas carry the same grammar as a pattern.
 */
export function duration(description: string, required: boolean, maxMs: number, what: string, formatRule: Rule, rangeRule: Rule) {
  return text(description, required)
    .superRefine((v, ctx) => {
      if (v === "") return;
      const checked = checkDuration(v, { maxMs });
      if (!("problem" in checked)) return;
      const rule = parseDuration(v) === undefined ? formatRule : rangeRule;
      ctx.addIssue({ code: "custom", message: `${what} "${v}" ${checked.problem}`, params: { rule }, input: v });
    })
    .meta({ pattern: DURATION_PATTERN.source });
}

/** Scalars a YAML author writes unquoted (`port: 5432`, `enabled: true`) become strings. */
export const scalarText = (description: string) =>
  z.union([z.string(), z.number(), z.boolean()]).transform((v) => String(v)).meta({ description });

function oneOf<T extends string>(values: readonly T[], rule: Rule, what: string, description: string) {
  return z.string()
    .refine((v) => v === "" || (values as readonly string[]).includes(v),
      broken(rule, (v) => `${what} "${v}" must be one of ${values.join(", ")}`))
    .meta({ description, enum: [...values] });
}

// ---- the plugin file ----

const StepRef = z.strictObject({
  name: stepName("step", "The step whose output this input reads (a create step, or for a delete step also a create step)."),
  output: stepName("output", "The output of that step, as declared in its `outputs`."),
}).meta({ description: "Read the value of another step's output. Within a phase these references must form a DAG." });

const InputAs = z.strictObject({
  env: text("Environment variable the value is given in.", false)
    .refine((v) => v === "" || ENV_NAME.test(v),
      broken("env-name", (v) => `env var "${v}" must match ${ENV_NAME.source}`))
    .refine((v) => !isReservedEnv(v),
      broken("reserved-env", (v) => `env var "${v}" is set by the runner (SIGNADOT_* and EPHEMERA_* names are reserved)`))
    .meta({ pattern: ENV_NAME.source })
    .optional(),
  path: filePath("File the value is written to before the script starts (absolute).", false).optional(),
}).meta({ description: "How the script sees the value: an env var, a file, or both. Without `as`, the env var is the input name upper-cased with '-' turned into '_'." });

const StepInput = z.strictObject({
  name: stepName("input", "Input name, unique within the step. With valueFromSandbox it is the key of the sandbox resource's params."),
  valueFromSandbox: z.boolean().optional().meta({ description: "Take the value from the sandbox resource's `params[name]`. A param the sandbox does not set is left unset (no env var, no file)." }),
  valueFromStep: StepRef.optional(),
  as: InputAs.optional(),
  type: text("The value's type as upstream declares it (e.g. `string`); kept with the plugin version and shown by `plugin get`, not interpreted.", false).optional(),
}).meta({ description: "A value the step reads: exactly one of `valueFromSandbox: true` or `valueFromStep`." });

const StepOutput = z.strictObject({
  name: stepName("output", "Output name, unique within the step. Sandboxes read it as `<step>.<output>`."),
  valueFromPath: filePath("File in the `main` container read after the script ends; its content is the output value.", true),
  description: text("What the output holds (free text; only the whole spec's size is bounded).", false).optional(),
  type: text("The value's type as upstream declares it (e.g. `string`); kept and shown, not interpreted.", false).optional(),
}).meta({ description: "A value the step produces, read from a file after the script ends." });

const Step = z.strictObject({
  name: stepName("step", "Step name, unique across the create and delete phases."),
  inputs: atMost(z.array(StepInput), MAX_COUNT.inputs, "inputs").optional().meta({ description: `Values the step reads (at most ${MAX_COUNT.inputs}).` }),
  outputs: atMost(z.array(StepOutput), MAX_COUNT.outputs, "outputs").optional().meta({ description: `Values the step produces (at most ${MAX_COUNT.outputs}).` }),
  script: maxBytes(text(`The program the step runs in the \`main\` container; its first line is \`#!\` naming the interpreter. At most ${MAX_BYTES.script / 1024} KiB.`, true)
    .refine((v) => v === "" || v.startsWith("#!"),
      broken("script-shebang", () => "script must start with a '#!' line naming its interpreter (e.g. #!/usr/bin/env bash)")), MAX_BYTES.script, "script")
    .meta({ pattern: "^#!" }),
  timeout: duration(
    `${OURS} How long one attempt may run, e.g. "90s", "10m", "1h30m"; ${durationLimitWords(MAX_DURATION_MS.stepTimeout, "h")}. ` +
      "Empty: the runner's default.",
    false, MAX_DURATION_MS.stepTimeout, "timeout", "timeout-format", "timeout-range",
  )
    .optional(),
  retries: z.number()
    .refine((v) => Number.isInteger(v) && v >= 0 && v <= MAX_RETRIES,
      broken("retries-range", (v) => `retries ${v} must be a whole number from 0 to ${MAX_RETRIES}`))
    .meta({ description: `${OURS} Extra attempts after a failed one (0 to ${MAX_RETRIES}; default 0).`, type: "integer", minimum: 0, maximum: MAX_RETRIES })
    .optional(),
}).meta({ id: "Step", description: "A script run in its own runner pod once its inputs are available." });

const Runner = z.strictObject({
  image: text("Image of the `main` container that runs each step's script.", true),
  namespace: text("Namespace the runner pods are created in. Default: `ephemera`.", false)
    .refine((v) => v === "" || /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(v),
      broken("name-format", (v) => `namespace "${v}" must be a lower-case DNS label`))
    .refine((v) => byteLength(v) <= 63, broken("too-long", () => "namespace is longer than 63 bytes"))
    .optional(),
  podTemplateOverlay: maxBytes(text("A YAML pod template (`metadata`, `spec`) merged into each runner pod, containers by name (the script runs in `main`). It may add env, volumes, a service account, annotations; it may not change restartPolicy from Never, the runner image or namespace, or use the containers `ephemera-init` and `ephemera-sidecar`.", false), MAX_BYTES.podTemplateOverlay, "podTemplateOverlay").optional(),
}).meta({ description: "Where and how the steps run." });

const PluginSpec = z.strictObject({
  description: text("What the plugin provides: free text of any length (public plugins have multi-paragraph descriptions); only the whole spec's size is bounded.", false).optional(),
  runner: Runner,
  create: atMost(z.array(Step), MAX_COUNT.stepsPerPhase, "create steps").optional().meta({ description: `Steps run when a sandbox using the plugin is created (at most ${MAX_COUNT.stepsPerPhase}).` }),
  delete: atMost(z.array(Step), MAX_COUNT.stepsPerPhase, "delete steps").optional().meta({ description: `Steps run when the sandbox is deleted; they may read outputs of create steps (at most ${MAX_COUNT.stepsPerPhase}).` }),
});

export const PluginDoc = z.strictObject({
  name: text(`Plugin name, optionally with a version: "name" (version 0.0.0) or "name@1.2.3". The name ${LABEL_RULE}, at most ${MAX_BYTES.pluginName} bytes.`, true)
    .superRefine((v, ctx) => {
      if (v === "") return;
      for (const p of pluginRefProblems(v)) ctx.addIssue({ code: "custom", message: p.message, params: { rule: p.rule }, input: v });
      if (v.endsWith("@latest")) {
        ctx.addIssue({ code: "custom", message: "a plugin file publishes a concrete version: use name or name@1.2.3, not @latest", params: { rule: "version-format" }, input: v });
      }
    })
    .meta({ pattern: "^[a-zA-Z]([a-zA-Z0-9-]*[a-zA-Z0-9])?(@.+)?$" }),
  spec: PluginSpec,
}).meta({ title: "ephemera resource plugin", description: "A resource plugin: the create and delete workflows of a sandbox resource." });

// ---- the sandbox file ----

const WorkloadRef = (description: string, kind = text("Workload kind, e.g. Deployment.", true)) => z.strictObject({
  kind,
  namespace: text("Namespace of the baseline workload.", true),
  name: text("Name of the baseline workload.", true),
}).meta({ description });

const KINDS_IN_WORDS = `${FORK_KINDS.slice(0, -1).join(", ")} or ${FORK_KINDS[FORK_KINDS.length - 1]}`;

/** A kind the runner can fork; one spelt in another case is named as it should be. */
const forkKind = text(`Workload kind: Deployment or Rollout (Argo Rollouts), or StatefulSet ${OURS}.`, true)
  .superRefine((v, ctx) => {
    if (v === "" || isForkKind(v)) return;
    const meant = FORK_KINDS.find((k) => k.toLowerCase() === v.toLowerCase());
    ctx.addIssue({
      code: "custom", params: { rule: "fork-kind" }, input: v,
      message: `kind "${v}" cannot be forked${meant ? `: did you mean ${meant}?` : ""} (a fork copies a ${KINDS_IN_WORDS})`,
    });
  })
  .meta({ enum: [...FORK_KINDS] });

/** Go-template text over the fork's Service, refused at plan time when the runner could not evaluate it. */
const forkExpression = text("What to take from that fork: text with `{{ .Service.Host }}` (its fork Service's host) and "
  + "`{{ .Service.Port }}` (that Service's first port), e.g. `http://{{ .Service.Host }}:{{ .Service.Port }}`.", true)
  .superRefine((v, ctx) => {
    const parsed = parseForkExpression(v);
    if ("problem" in parsed) ctx.addIssue({ code: "custom", params: { rule: "fork-expression" }, input: v, message: parsed.problem });
  });

const KeyRef = (what: string) => z.strictObject({
  name: text(`Name of the ${what}, in the workload's namespace.`, true),
  key: text(`Key in the ${what}.`, true),
  optional: z.boolean().optional().meta({ description: `A missing ${what} or key leaves the variable unset instead of failing.` }),
}).meta({ description: `A key of a ${what}.` });

const ResourceOutputRef = z.strictObject({
  name: text("A resource of this sandbox (`spec.resources[].name`).", true),
  outputKey: text("`<step>.<output>`: a create step of the resource's plugin and one of its outputs.", true)
    .refine((v) => v === "" || isOutputKey(v),
      broken("output-key-format", (v) => `outputKey "${v}" must be <step>.<output> (two names joined by one '.')`))
    .meta({ pattern: `^${STEP_NAME.source.slice(1, -1)}\\.${STEP_NAME.source.slice(1, -1)}$` }),
}).meta({ description: "An output of a resource's create workflow." });

/** Where an env var's or a local file's value comes from: exactly one source. */
const ValueFrom = z.strictObject({
  resource: ResourceOutputRef.optional(),
  secret: KeyRef("Secret").optional(),
  configMap: KeyRef("ConfigMap").optional(),
  fork: z.strictObject({
    forkOf: WorkloadRef("A fork of this sandbox (one of `spec.forks[].forkOf`)."),
    expression: forkExpression,
  }).optional().meta({ description: "A value computed from another fork of this sandbox." }),
}).meta({ description: "Where the value comes from: exactly one of resource, secret, configMap, fork." });

const EnvCustomization = z.strictObject({
  name: text("Env var name.", true)
    .refine((v) => v === "" || WORKLOAD_ENV_NAME.test(v),
      broken("env-name", (v) => `env var "${v}" must match ${WORKLOAD_ENV_NAME.source}`))
    .meta({ pattern: WORKLOAD_ENV_NAME.source }),
  value: scalarText("Literal value (numbers and booleans are turned into strings).").optional(),
  valueFrom: ValueFrom.optional(),
  container: text("Container to set it in; default: the workload's main container.", false).optional(),
  operation: oneOf(ENV_OPERATIONS, "env-operation", "operation", "upsert (default) sets the variable; delete removes it.").optional(),
});

const Port = (description: string) => z.number()
  .refine((v) => Number.isInteger(v) && v >= 1 && v <= 65535, broken("port-range", (v) => `port ${v} must be a whole number from 1 to 65535`))
  .meta({ description, type: "integer", minimum: 1, maximum: 65535 });

const Fork = z.strictObject({
  name: named("fork name", LABEL_NAME, MAX_BYTES.resourceName, LABEL_RULE, "Name of the fork, unique in the sandbox.").optional(),
  forkOf: WorkloadRef("The baseline workload this fork copies.", forkKind),
  endpoints: z.array(z.strictObject({
    name: text("Endpoint name.", true),
    port: Port("Port of the forked workload.").optional(),
    protocol: text("Protocol, e.g. http or grpc.", false).optional(),
  })).optional().meta({ description: "Deprecated upstream: use `defaultRouteGroup.endpoints`. Accepted and kept." }),
  customizations: z.strictObject({
    images: z.array(z.strictObject({
      image: text("Image to run.", true),
      container: text("Container to change; default: the workload's main container.", false).optional(),
    })).optional().meta({ description: "Images replacing the baseline's." }),
    env: z.array(EnvCustomization).optional().meta({ description: "Env vars to set or remove." }),
    patch: z.strictObject({
      type: oneOf(PATCH_TYPES, "patch-type", "patch type", "How `value` is applied: strategic (Kubernetes strategic merge), merge (JSON merge patch) or json (JSON patch).").refine((v) => v !== "", broken("required", () => "is required")),
      value: text("The patch, as YAML or JSON text.", true),
    }).optional().meta({ description: "A patch applied to the forked workload." }),
  }).optional().meta({ description: "How the fork differs from its baseline." }),
});

const Local = z.strictObject({
  name: named("local workload name", LABEL_NAME, MAX_BYTES.resourceName, LABEL_RULE, "Name of the local workload, unique in the sandbox."),
  from: WorkloadRef("The baseline workload whose traffic goes to the local machine."),
  mappings: z.array(z.strictObject({
    port: z.number()
      .refine((v) => Number.isInteger(v) && v >= 1 && v <= 65535, broken("port-range", (v) => `port ${v} must be a whole number from 1 to 65535`))
      .meta({ description: "Port of the baseline workload.", type: "integer", minimum: 1, maximum: 65535 }),
    toLocal: text("`host:port` on the local machine.", true)
      .refine((v) => v === "" || /^[^\s:]+:[0-9]{1,5}$/.test(v), broken("local-address", (v) => `toLocal "${v}" must be host:port`))
      .meta({ pattern: "^[^\\s:]+:[0-9]{1,5}$" }),
  })).optional().meta({ description: "Ports sent to the local machine." }),
  env: z.array(EnvCustomization).optional().meta({ description: "Env vars the local workload runs with; `valueFrom.resource` reads outputs of this sandbox's resources." }),
  files: z.array(z.strictObject({
    path: text("Where the file is written on the local machine.", true),
    valueFrom: ValueFrom,
  })).optional().meta({ description: "Files the local workload gets; `valueFrom.resource` reads outputs of this sandbox's resources." }),
});

const Virtual = z.strictObject({
  name: named("virtual workload name", LABEL_NAME, MAX_BYTES.resourceName, LABEL_RULE, "Name of the virtual workload, unique in the sandbox."),
  workload: WorkloadRef("The baseline workload this virtual workload stands for."),
});

export const Endpoint = z.strictObject({
  name: named("endpoint name", LABEL_NAME, MAX_BYTES.resourceName, LABEL_RULE, "Endpoint name, unique in the sandbox."),
  target: text("URL inside the cluster, e.g. http://orders.shop.svc:8080.", true)
    .refine((v) => v === "" || isUrl(v), broken("endpoint-target", (v) => `target "${v}" must be a URL such as http://svc.ns.svc:8080`)),
});

/** Free-form labels of a sandbox, a runner group or a job. */
export const labels = () => atMostKeys(z.record(
  maxBytes(z.string(), MAX_BYTES.labelKey, "label key"),
  scalarText("Label value.").pipe(maxBytes(z.string(), MAX_BYTES.labelValue, "label value")),
), MAX_COUNT.labels, "labels").optional()
  .meta({ description: `Free-form labels (values given as numbers or booleans are turned into strings); at most ${MAX_COUNT.labels}, keys ${MAX_BYTES.labelKey} bytes, values ${MAX_BYTES.labelValue} bytes.` });

const SandboxSpec = z.strictObject({
  cluster: named("cluster", CLUSTER_NAME, MAX_BYTES.clusterName, "must contain only letters, digits, '_' and '-' (it is part of queue subjects)", "The cluster whose runner executes the sandbox's resources (e.g. `local`)."),
  description: text("What the sandbox is for.", false).optional(),
  labels: labels(),
  ttl: z.strictObject({
    duration: duration(
      `How long the sandbox lives: a number and a unit m, h, d or w, e.g. "2d"; ${OURS} also s and ms, decimals and sums ` +
        `such as "1d12h"; ${durationLimitWords(MAX_DURATION_MS.ttl, "d")}.`,
      true, MAX_DURATION_MS.ttl, "duration", "ttl-duration", "ttl-duration",
    ),
    offsetFrom: oneOf(TTL_OFFSETS, "ttl-offset-from", "offsetFrom", "Counted from createdAt (default) or updatedAt.").optional(),
  }).optional().meta({ description: "Delete the sandbox automatically after this time." }),
  resources: atMost(z.array(z.strictObject({
    name: named("resource name", LABEL_NAME, MAX_BYTES.resourceName, LABEL_RULE, "Resource name, unique in the sandbox (it appears in subjects and pod labels)."),
    plugin: text("The plugin: name (the highest version when the sandbox is created), name@1.2.3 or name@latest.", true)
      .superRefine((v, ctx) => {
        if (v === "") return;
        for (const p of pluginRefProblems(v)) ctx.addIssue({ code: "custom", message: p.message, params: { rule: p.rule }, input: v });
      }),
    params: atMostKeys(z.record(z.string(), scalarText("Param value.").pipe(maxBytes(z.string(), MAX_BYTES.paramValue, "param value"))), MAX_COUNT.params, "params").optional()
      .meta({ description: "Values for the plugin's `valueFromSandbox` inputs, by input name. Numbers and booleans are turned into strings. Params the plugin reads but the sandbox does not set stay unset." }),
  })), MAX_COUNT.resources, "resources").optional().meta({ description: `Ephemeral resources created before the sandbox's workloads (at most ${MAX_COUNT.resources}).` }),
  forks: z.array(Fork).optional().meta({ description: "Workloads forked from a baseline." }),
  local: z.array(Local).optional().meta({ description: "Baseline workloads whose traffic goes to a local machine." }),
  defaultRouteGroup: z.strictObject({
    endpoints: z.array(Endpoint).optional(),
  }).optional().meta({ description: "Endpoints (preview URLs) of the sandbox." }),
  virtual: z.array(Virtual).optional().meta({ description: "Baseline workloads taken into the sandbox's routing without a fork." }),
  endpoints: z.array(z.strictObject({
    name: text("Endpoint name.", true),
    host: text("Host the endpoint points to.", false).optional(),
    port: Port("Port on that host.").optional(),
    protocol: text("Protocol, e.g. http or grpc.", false).optional(),
  })).optional().meta({ description: "Deprecated upstream: use `defaultRouteGroup.endpoints`. Accepted and kept." }),
});

export const SandboxDoc = z.strictObject({
  name: named("sandbox name", LABEL_NAME, MAX_BYTES.sandboxName, LABEL_RULE, "Sandbox name; it cannot change."),
  spec: SandboxSpec,
}).meta({ title: "ephemera sandbox", description: "A sandbox: forked and local workloads, endpoints, and its ephemeral resources." });

export function isOutputKey(v: string): boolean {
  const parts = v.split(".");
  return parts.length === 2 && parts.every((p) => STEP_NAME.test(p));
}

function isUrl(v: string): boolean {
  try {
    const u = new URL(v);
    return u.host !== "" && /^[a-z][a-z0-9+.-]*:$/.test(u.protocol);
  } catch {
    return false;
  }
}
