// The job runner group and job files (Signadot's JobRunnerGroup and Job): their shape and
// the rules across their fields. Shared by `eph` (fast feedback) and the sandbox service
// (the trust boundary), like the route group's.
import * as z from "zod";
import {
  byteLength, checkSpecSize, CLUSTER_NAME, DEFAULT_JOB_TIMEOUT_MS, JOB_NAME_PREFIX, LABEL_NAME, MAX_BYTES, MAX_COUNT,
  MAX_DESIRED_PODS, MAX_DURATION_MS, MAX_SPEC_BYTES, RESERVED_CONTAINERS, durationLimitWords,
} from "./names.js";
import { atMost, atMostKeys, broken, duration, filePath, LABEL_RULE, labels, maxBytes, named, scalarText, text } from "./model.js";
import { fieldPath, type Violations } from "./violations.js";

const NAMESPACE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

// ---- the job runner group file ----

const PodTemplate = z.strictObject({
  metadata: z.record(z.string(), z.unknown()).optional().meta({ description: "Labels and annotations of each pod." }),
  spec: z.record(z.string(), z.unknown()).optional().meta({
    description: "A Kubernetes PodSpec: the `main` container runs the jobs (its image is `image` when it gives none); "
      + `ephemera adds the job agent; the containers ${RESERVED_CONTAINERS.join(" and ")} are ephemera's.`,
  }),
}).meta({ description: `A Kubernetes PodTemplateSpec each pod of the group is made from (at most ${MAX_BYTES.podTemplate / 1024} KiB as JSON).` });

const JobRunnerGroupSpec = z.strictObject({
  cluster: named("cluster", CLUSTER_NAME, MAX_BYTES.clusterName, "must contain only letters, digits, '_' and '-'",
    "The cluster whose runner keeps the group's pods."),
  labels: labels(),
  namespace: text("Namespace the group's pods run in. Default: `ephemera`.", false)
    .refine((v) => v === "" || NAMESPACE.test(v), broken("name-format", (v) => `namespace "${v}" must be a lower-case DNS label`))
    .refine((v) => byteLength(v) <= 63, broken("too-long", () => "namespace is longer than 63 bytes"))
    .optional(),
  jobTimeout: duration(
    `Longest a job may run, e.g. "30m", "1h"; ${durationLimitWords(MAX_DURATION_MS.jobTimeout, "h")}. Default: ${DEFAULT_JOB_TIMEOUT_MS / 60_000}m.`,
    false, MAX_DURATION_MS.jobTimeout, "jobTimeout", "timeout-format", "timeout-range",
  ).optional(),
  image: text("Image of the `main` container, in whose environment each job's script runs (with its user).", true),
  podTemplate: PodTemplate.optional(),
  scaling: z.strictObject({
    manual: z.strictObject({
      desiredPods: z.number()
        .refine((v) => Number.isInteger(v) && v >= 1 && v <= MAX_DESIRED_PODS,
          broken("desired-pods-range", (v) => `desiredPods ${v} must be a whole number from 1 to ${MAX_DESIRED_PODS}`))
        .meta({ description: "How many pods the runner keeps ready.", type: "integer", minimum: 1, maximum: MAX_DESIRED_PODS }),
    }),
  }).optional().meta({ description: "How many pods the group keeps. Default: one." }),
});

export const JobRunnerGroupDoc = z.strictObject({
  name: named("runner group name", LABEL_NAME, MAX_BYTES.resourceName, LABEL_RULE, "Job runner group name; it cannot change."),
  spec: JobRunnerGroupSpec,
}).meta({ title: "ephemera job runner group", description: "Pods kept ready to run jobs, made from a pod template. Created and changed by admins." });

/** Rules across fields: the template's size, its containers, the whole spec's size. */
export function checkJobRunnerGroupRules(doc: unknown, out: Violations): void {
  const spec = isObj(doc) && isObj(doc.spec) ? doc.spec : {};
  checkSpecSize(spec, MAX_SPEC_BYTES.sandbox, "job runner group", out);
  const template = spec.podTemplate;
  if (!isObj(template)) return;
  const size = byteLength(JSON.stringify(template));
  if (size > MAX_BYTES.podTemplate) {
    out.add(["spec", "podTemplate"], "too-long", `podTemplate is ${size} bytes as JSON, over the ${MAX_BYTES.podTemplate}-byte limit`);
  }
  const podSpec = template.spec;
  if (!isObj(podSpec) || podSpec.containers === undefined) return;
  const at = ["spec", "podTemplate", "spec", "containers"];
  if (!Array.isArray(podSpec.containers)) {
    out.add(at, "pod-template", "containers must be a list of containers");
    return;
  }
  podSpec.containers.forEach((c: unknown, i) => {
    const name = isObj(c) ? c.name : undefined;
    if (typeof name !== "string" || name === "") out.add([...at, i, "name"], "pod-template", "a container needs a name (jobs run in the one named main)");
    else if ((RESERVED_CONTAINERS as readonly string[]).includes(name)) {
      out.add([...at, i, "name"], "pod-template", `container "${name}" is ephemera's: name yours otherwise`);
    }
  });
}

// ---- the job file ----

const RoutingContext = z.strictObject({
  sandbox: named("sandbox name", LABEL_NAME, MAX_BYTES.sandboxName, LABEL_RULE, "The sandbox whose routing key the job's requests carry.").optional(),
  routegroup: named("route group name", LABEL_NAME, MAX_BYTES.sandboxName, LABEL_RULE, "The route group whose routing key the job's requests carry.").optional(),
}).meta({ description: "At most one of `sandbox` or `routegroup`: the job runs with its routing key in SIGNADOT_ROUTING_KEY and EPHEMERA_ROUTING_KEY." });

const Artifact = z.strictObject({
  path: filePath("A file in the job's pod kept after the job ends (absolute).", true),
  meta: atMostKeys(z.record(z.string(), scalarText("A value.")), MAX_COUNT.labels, "meta entries").optional()
    .meta({ description: "Free-form facts shown with the artifact by `eph job get`." }),
});

const JobSpec = z.strictObject({
  runnerGroup: named("runner group name", LABEL_NAME, MAX_BYTES.resourceName, LABEL_RULE, "The job runner group whose pods run the job."),
  namePrefix: text(`The job's name is this, '-' and a random part (default \`job\`); at most ${MAX_BYTES.jobNamePrefix} bytes of letters, digits, '_' and '-'.`, false)
    .refine((v) => JOB_NAME_PREFIX.test(v), broken("name-format", (v) => `namePrefix "${v}" must contain only letters, digits, '_' and '-'`))
    .refine((v) => byteLength(v) <= MAX_BYTES.jobNamePrefix, broken("too-long", () => `namePrefix is longer than ${MAX_BYTES.jobNamePrefix} bytes`))
    .meta({ pattern: JOB_NAME_PREFIX.source, maxLength: MAX_BYTES.jobNamePrefix })
    .optional(),
  script: maxBytes(text(`The program the job runs; its first line is \`#!\` naming the interpreter. At most ${MAX_BYTES.script / 1024} KiB. Exactly one of script or command.`, false)
    .refine((v) => v === "" || v.startsWith("#!"),
      broken("script-shebang", () => "script must start with a '#!' line naming its interpreter (e.g. #!/usr/bin/env bash)")), MAX_BYTES.script, "script")
    .meta({ pattern: "^#!" })
    .optional(),
  command: atMost(z.array(maxBytes(text("One argument.", true), MAX_BYTES.commandArg, "argument")), MAX_COUNT.commandArgs, "arguments")
    .optional().meta({ description: "The program and its arguments, run without a shell. Exactly one of script or command." }),
  labels: labels(),
  uploadArtifact: atMost(z.array(Artifact), MAX_COUNT.artifacts, "artifacts").optional()
    .meta({ description: `Files kept after the job ends (at most ${MAX_COUNT.artifacts}); stdout and stderr are kept as @stdout and @stderr.` }),
  routingContext: RoutingContext.optional(),
});

export const JobDoc = z.strictObject({
  spec: JobSpec,
}).meta({ title: "ephemera job", description: "A script or command run on a pod of a job runner group, in the routing context of a sandbox or route group. Its name is generated at submit." });

/** Rules across fields: one of script or command, at most one routing context, artifact paths unique. */
export function checkJobRules(doc: unknown, out: Violations): void {
  const spec = isObj(doc) && isObj(doc.spec) ? doc.spec : undefined;
  if (!spec) return;
  checkSpecSize(spec, MAX_SPEC_BYTES.job, "job", out);
  const hasScript = typeof spec.script === "string" && spec.script !== "";
  const hasCommand = Array.isArray(spec.command) && spec.command.length > 0;
  if (hasScript && hasCommand) out.add(["spec", "command"], "script-or-command", "a job has script and command: give exactly one");
  else if (!hasScript && !hasCommand) out.add(["spec", "script"], "script-or-command", "a job needs a script (starting with #!) or a command");
  const context = spec.routingContext;
  if (isObj(context) && typeof context.sandbox === "string" && context.sandbox !== "" && typeof context.routegroup === "string" && context.routegroup !== "") {
    out.add(["spec", "routingContext"], "routing-context", "a routing context names a sandbox or a route group, not both");
  }
  const first = new Map<string, number>();
  (Array.isArray(spec.uploadArtifact) ? spec.uploadArtifact : []).forEach((a: unknown, i) => {
    const path = isObj(a) && typeof a.path === "string" && a.path !== "" ? a.path : undefined;
    if (path === undefined) return;
    const earlier = first.get(path);
    if (earlier !== undefined) out.add(["spec", "uploadArtifact", i, "path"], "duplicate-path", `path "${path}" is already kept at ${fieldPath(["spec", "uploadArtifact", earlier])}`);
    else first.set(path, i);
  });
}
