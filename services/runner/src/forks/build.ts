// A sandbox's forked workload as a pure function of its baseline (a Deployment, Rollout or
// StatefulSet as read from the cluster) and the fork's customizations: a deterministic name,
// ephemera.dev labels, pod labels made distinct from the baseline's so that the baseline's
// Services never select the fork's pods, the images and env the sandbox asks for (resource
// outputs through a Secret, never inlined; other forks' Services by their expressions;
// variables deleted), the sandbox's name and routing key in every container, then the
// fork's patch (strategic, merge or JSON patch). Also the Secret of resource outputs, and a
// fork Service for each baseline Service. Nothing here talks to a cluster: the fork
// reconciler (reconciler.ts, kube.ts) writes what these build.
// The package is CommonJS: Node gives its exports as the default import.
import jsonpatch, { type Operation } from "fast-json-patch";
import { parse } from "yaml";
import { ValidationError, baselineOf, forkName, forkValue, type ForkService } from "@ephemera/kit";
import type * as pb from "@ephemera/proto";
import { strategicMerge, type Json } from "../driver/kube/merge.js";
import { labelValue } from "../driver/kube/pod.js";

type Obj = { [key: string]: Json };

export interface ForkRequest {
  sandbox: { name: string; routingKey: string };
  fork: pb.Fork;
  /** The baseline workload as the cluster has it. */
  baseline: Obj;
  /**
   * What `valueFrom.fork` reads: for each fork of the sandbox (by `baselineLabel` of its
   * baseline), its Service, or undefined when no Service selects its baseline's pods.
   */
  forkServices?: Map<string, ForkService | undefined>;
}

// The fork Services `valueFrom.fork` reads, and its value: shared with the tunnel, which resolves a local's env alike.
export { ForkValueError, forkServiceOf, type ForkService } from "@ephemera/kit";

const LABEL = "ephemera.dev";

/** On each fork Service (and ephemera's VirtualServices): the baseline Service, in the same namespace, it stands for. */
export const BASELINE_SERVICE_LABEL = `${LABEL}/baseline-service`;

/** Pure: the Secret holding a sandbox's resource outputs that its forks' env reads. */
export const outputsSecretName = (routingKey: string) => `ephemera-${routingKey}-outputs`;

/** Pure: the key of a resource output in that Secret (`<resource>.<step>.<output>` made a valid key). */
export const outputKey = (resource: string, key: string) => `${resource}.${key}`.replace(/[^-._a-zA-Z0-9]/g, "_");

/** The API server refuses a Secret whose values total more than this many bytes. */
export const SECRET_DATA_MAX_BYTES = 1024 * 1024;

/** The outputs one namespace's forks read do not fit in one Secret: their keys and sizes, never their values. */
export class OutputsTooLargeError extends Error {
  override readonly name = "OutputsTooLargeError";
  readonly total: number;

  constructor(readonly namespace: string, readonly sizes: Array<{ key: string; size: number }>) {
    const total = sizes.reduce((n, s) => n + s.size, 0);
    const listed = [...sizes].sort((a, b) => b.size - a.size).map((s) => `${s.key} (${s.size} bytes)`).join(", ");
    super(`the outputs the forks in namespace ${namespace} read total ${total} bytes, over the ${SECRET_DATA_MAX_BYTES} bytes (1 MiB) `
      + `a Kubernetes Secret may hold: ${listed}`);
    this.total = total;
  }
}
export const isOutputsTooLargeError = (e: unknown): e is OutputsTooLargeError => e instanceof OutputsTooLargeError;

/** Pure: every `valueFrom.resource` the forks' env reads, as resource and `<step>.<output>`. */
export function outputsRead(forks: pb.Fork[]): Array<{ resource: string; key: string }> {
  const seen = new Map<string, { resource: string; key: string }>();
  for (const f of forks) {
    for (const e of f.customizations?.env ?? []) {
      const r = e.valueFrom?.resource;
      if (r) seen.set(`${r.name}/${r.outputKey}`, { resource: r.name, key: r.outputKey });
    }
  }
  return [...seen.values()];
}

/** Pure: the forked workload. */
export function buildFork(r: ForkRequest): Obj {
  const meta = (r.baseline["metadata"] ?? {}) as Obj;
  const baselineName = String(meta["name"] ?? "");
  const namespace = String(meta["namespace"] ?? "default");
  const name = forkName(baselineName, r.sandbox.routingKey);
  const ours = {
    [`${LABEL}/sandbox`]: labelValue(r.sandbox.name), [`${LABEL}/routing-key`]: r.sandbox.routingKey, [`${LABEL}/fork`]: name,
  };
  const spec = structuredClone((r.baseline["spec"] ?? {}) as Obj);
  const selector = ((spec["selector"] as Obj | undefined)?.["matchLabels"] ?? {}) as Record<string, string>;
  // Each label the baseline selects on takes the fork's name as its value: its Services no longer match.
  const distinct = Object.fromEntries(Object.keys(selector).map((k) => [k, name]));
  const template = (spec["template"] ?? {}) as Obj;
  const templateMeta = (template["metadata"] ?? {}) as Obj;
  template["metadata"] = { ...templateMeta, labels: { ...((templateMeta["labels"] as Obj) ?? {}), ...distinct, ...ours } };
  spec["selector"] = { matchLabels: { ...distinct, [`${LABEL}/fork`]: name } };
  if ("replicas" in spec) spec["replicas"] = 1;
  const podSpec = (template["spec"] ?? {}) as Obj;
  const containers = (podSpec["containers"] ?? []) as Obj[];
  customize(containers, r);
  template["spec"] = podSpec;
  spec["template"] = template;
  const workload: Obj = {
    apiVersion: r.baseline["apiVersion"] ?? "apps/v1",
    kind: r.baseline["kind"] ?? "Deployment",
    metadata: { name, namespace, labels: { ...((meta["labels"] as Obj) ?? {}), ...ours } },
    spec,
  };
  return patched(workload, r.fork.customizations?.patch);
}

function customize(containers: Obj[], r: ForkRequest): void {
  const target = (container: string) => containers.filter((c) => !container || c["name"] === container);
  for (const img of r.fork.customizations?.images ?? []) for (const c of target(img.container)) c["image"] = img.image;
  const always: pb.EnvCustomization[] = [
    ["SIGNADOT_SANDBOX_NAME", r.sandbox.name], ["SIGNADOT_SANDBOX_ROUTING_KEY", r.sandbox.routingKey],
    ["EPHEMERA_SANDBOX_NAME", r.sandbox.name], ["EPHEMERA_ROUTING_KEY", r.sandbox.routingKey],
  ].map(([name, value]) => ({ name: name!, value: value!, container: "", operation: "" }));
  for (const e of [...always, ...(r.fork.customizations?.env ?? [])]) {
    // Computed once, whatever the number of containers it goes to.
    const source = e.operation === "delete" ? undefined : envSource(e, r);
    for (const c of target(e.container)) {
      const env = ((c["env"] ?? []) as Obj[]).filter((x) => x["name"] !== e.name);
      if (source) env.push({ name: e.name, ...source });
      c["env"] = env;
    }
  }
}

/** An env var's value or source: a resource output through the outputs Secret, never the value itself. */
function envSource(e: pb.EnvCustomization, r: ForkRequest): Obj {
  const from = e.valueFrom;
  if (from?.resource) {
    return { valueFrom: { secretKeyRef: { name: outputsSecretName(r.sandbox.routingKey), key: outputKey(from.resource.name, from.resource.outputKey) } } };
  }
  if (from?.secret) return { valueFrom: { secretKeyRef: { name: from.secret.name, key: from.secret.key, ...(from.secret.optional ? { optional: true } : {}) } } };
  if (from?.configMap) return { valueFrom: { configMapKeyRef: { name: from.configMap.name, key: from.configMap.key, ...(from.configMap.optional ? { optional: true } : {}) } } };
  if (from?.fork?.forkOf) return { value: forkValue(e.name, from.fork, r.forkServices ?? new Map()) };
  return { value: e.value };
}

function patched(workload: Obj, patch: pb.Patch | undefined): Obj {
  if (!patch?.value.trim()) return workload;
  let doc: unknown;
  try {
    doc = parse(patch.value);
  } catch (err) {
    throw invalid(`not YAML or JSON: ${(err as Error).message.split("\n")[0]}`);
  }
  switch (patch.type || "strategic") {
    case "strategic": return strategicWorkload(workload, doc as Json);
    case "merge": return mergePatch(workload, doc as Json) as Obj;
    case "json": {
      if (!Array.isArray(doc)) throw invalid("a JSON patch is a list of operations");
      try {
        return jsonpatch.applyPatch(structuredClone(workload), doc as Operation[], true, false).newDocument;
      } catch (err) {
        throw invalid(`the JSON patch does not apply: ${(err as Error).message.split("\n")[0]}`);
      }
    }
    default: throw invalid(`unknown patch type "${patch.type}" (strategic, merge or json)`);
  }
}

/**
 * A strategic merge patch of a workload: its pod template merged as a pod template (lists
 * by their Kubernetes merge keys), the rest map by map.
 */
function strategicWorkload(workload: Obj, patch: Json): Obj {
  if (patch === null || typeof patch !== "object" || Array.isArray(patch)) throw invalid("a strategic merge patch is a map");
  const spec = patch["spec"];
  const template = spec !== null && typeof spec === "object" && !Array.isArray(spec) ? spec["template"] : undefined;
  const rest: Obj = template === undefined ? patch : { ...patch, spec: Object.fromEntries(Object.entries(spec as Obj).filter(([k]) => k !== "template")) };
  const out = strategicMerge(workload, rest) as Obj;
  if (template !== undefined) {
    const outSpec = out["spec"] as Obj;
    outSpec["template"] = strategicMerge(outSpec["template"], template);
  }
  return out;
}

/** RFC 7386: maps merged key by key, null removes, anything else replaces. */
function mergePatch(target: Json, patch: Json): Json {
  if (patch === null || typeof patch !== "object" || Array.isArray(patch)) return patch;
  const out: Obj = target !== null && typeof target === "object" && !Array.isArray(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k] ?? null, v);
  }
  return out;
}

const invalid = (description: string) =>
  new ValidationError([{ field: "forks.customizations.patch", rule: "patch", description }], "the fork's patch cannot be applied");

/**
 * Pure: in each namespace whose forks read resource outputs, the Secret of those outputs
 * (only them: a namespace's Secret holds what its forks read). Outputs over the 1 MiB a
 * Secret may hold in one namespace: OutputsTooLargeError, before anything is written.
 */
export function buildOutputsSecrets(sandbox: { name: string; routingKey: string }, forks: pb.Fork[], values: Map<string, Buffer>): Obj[] {
  const byNamespace = new Map<string, pb.Fork[]>();
  for (const f of forks) {
    const ns = baselineOf(f.forkOf).namespace;
    byNamespace.set(ns, [...(byNamespace.get(ns) ?? []), f]);
  }
  const secrets: Obj[] = [];
  for (const [namespace, theirs] of byNamespace) {
    const keys = outputsRead(theirs).map((o) => outputKey(o.resource, o.key)).filter((k) => values.has(k)).sort();
    if (!keys.length) continue;
    const sizes = keys.map((key) => ({ key, size: values.get(key)!.length }));
    if (sizes.reduce((n, s) => n + s.size, 0) > SECRET_DATA_MAX_BYTES) throw new OutputsTooLargeError(namespace, sizes);
    secrets.push(buildOutputsSecret(sandbox, namespace, new Map(keys.map((k) => [k, values.get(k)!]))));
  }
  return secrets;
}

/** Pure: the Secret of a sandbox's resource outputs (values base64, as Kubernetes keeps them). */
export function buildOutputsSecret(sandbox: { name: string; routingKey: string }, namespace: string, values: Map<string, Buffer>): Obj {
  return {
    apiVersion: "v1", kind: "Secret", type: "Opaque",
    metadata: {
      name: outputsSecretName(sandbox.routingKey), namespace,
      labels: { [`${LABEL}/sandbox`]: labelValue(sandbox.name), [`${LABEL}/routing-key`]: sandbox.routingKey },
    },
    data: Object.fromEntries([...values].map(([k, v]) => [k, v.toString("base64")])),
  };
}

/**
 * Pure: for a baseline Service, the fork's: the same ports, selecting the fork's pods,
 * labelled with the baseline Service's name (a mesh's routes are found from it). It
 * is always a ClusterIP Service (traffic reaches forks inside the cluster, by the routing
 * rules): a NodePort's port or a LoadBalancer of the baseline is not claimed a second time.
 */
export function buildForkService(baselineService: Obj, fork: Obj, routingKey: string): Obj {
  const meta = (baselineService["metadata"] ?? {}) as Obj;
  const spec = (baselineService["spec"] ?? {}) as Obj;
  const forkMeta = fork["metadata"] as Obj;
  const podLabels = ((((fork["spec"] as Obj)["selector"] as Obj)["matchLabels"]) ?? {}) as Obj;
  return {
    apiVersion: "v1", kind: "Service",
    metadata: {
      name: forkName(String(meta["name"]), routingKey), namespace: meta["namespace"] ?? forkMeta["namespace"] ?? "default",
      labels: { ...((forkMeta["labels"] as Obj) ?? {}), [BASELINE_SERVICE_LABEL]: meta["name"] ?? "" },
    },
    spec: { selector: podLabels, ports: ((spec["ports"] ?? []) as Obj[]).map(({ nodePort: _n, ...port }) => port) },
  };
}
