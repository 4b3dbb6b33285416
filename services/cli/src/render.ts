// What `get` and `list` print: the JSON/YAML documents scripts depend on, and the tables.
import * as pb from "@ephemera/proto";
import { stringify } from "yaml";
import { errorMessage } from "@ephemera/kit/errors";

export type OutputFormat = "json" | "yaml";

export interface OutputDoc {
  size: number;
  value?: string;
  base64?: string;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** An output value as text when it is valid UTF-8, otherwise as base64. */
export function outputDoc(output: pb.ResourceOutput, showValue: boolean): OutputDoc {
  if (!showValue || output.value === undefined) return { size: output.size };
  try {
    return { size: output.size, value: utf8.decode(output.value) };
  } catch {
    return { size: output.size, base64: Buffer.from(output.value).toString("base64") };
  }
}

export function resourceDoc(r: pb.ResourceView, showOutputs: boolean): Record<string, unknown> {
  const doc: Record<string, unknown> = {
    name: r.name,
    plugin: r.plugin,
    version: r.version,
    status: r.status,
    outputs: Object.fromEntries(r.outputs.map((o) => [o.key, outputDoc(o, showOutputs)])),
  };
  if (r.steps.length) doc["steps"] = r.steps.map((s) => pb.StepView.toJSON(s));
  if (r.failure) doc["failure"] = pb.StepFailure.toJSON(r.failure);
  return doc;
}

/** The document of `eph sandbox get -o json|yaml` (a contract: scripts read it). */
export function sandboxDoc(v: pb.SandboxView, showOutputs: boolean): Record<string, unknown> {
  return {
    name: v.name,
    routingKey: v.routingKey,
    spec: v.spec ? pb.SandboxSpec.toJSON(v.spec) : {},
    status: {
      ready: v.status?.ready ?? false, reason: v.status?.reason ?? "", message: v.status?.message ?? "",
      ...(v.status?.scheduledDeleteTime ? { scheduledDeleteTime: v.status.scheduledDeleteTime } : {}),
    },
    endpoints: v.endpoints.map((e) => ({ name: e.name, url: e.url, target: e.target, ...(e.baselineUrl ? { baselineUrl: e.baselineUrl } : {}) })),
    resources: v.resources.map((r) => resourceDoc(r, showOutputs)),
    ...(v.workloads.length ? {
      workloads: v.workloads.map((w) => ({
        kind: w.kind, name: w.name, status: w.status, message: w.message, ...(w.workload ? { workload: w.workload } : {}), ...(w.hosts.length ? { hosts: w.hosts } : {}),
      })),
    } : {}),
    createdAt: v.createdAt,
    updatedAt: v.updatedAt,
    ...(v.renderError ? { renderError: v.renderError } : {}),
  };
}

/**
 * The entries of `eph sandbox list -o json|yaml`, each rendered on its own: one that
 * cannot be (a server's answer this client does not understand) is listed with its name
 * and what is wrong, and the others as usual.
 */
export function sandboxDocs(views: pb.SandboxView[]): Record<string, unknown>[] {
  return views.map((v) => {
    try {
      return sandboxDoc(v, false);
    } catch (err) {
      return { name: v.name, renderError: `cannot be shown: ${errorMessage(err)}` };
    }
  });
}

/** The document of `eph plugin get`: the version's identity, who uses it, and its file-shaped spec. */
export function pluginDoc(p: pb.ResourcePluginVersion): Record<string, unknown> {
  return {
    name: p.name,
    version: p.version,
    digest: p.digest,
    createdAt: p.createdAt,
    sandboxes: p.sandboxes,
    deleting: p.deleting,
    spec: p.spec ? pb.ResourcePluginSpec.toJSON(p.spec) : {},
  };
}

/** The entries of `eph plugin list -o json` / `versions -o json` (without the specs). */
export function pluginSummary(p: pb.ResourcePluginVersion): Record<string, unknown> {
  return { name: p.name, version: p.version, digest: p.digest, createdAt: p.createdAt, sandboxes: p.sandboxes, deleting: p.deleting };
}

export function formatDoc(doc: unknown, format: OutputFormat): string {
  return format === "json" ? `${JSON.stringify(doc, null, 2)}\n` : stringify(doc);
}

/** The document of `eph routegroup get -o json|yaml` (a contract: scripts read it). */
export function routeGroupDoc(v: pb.RouteGroupView): Record<string, unknown> {
  return {
    name: v.name,
    routingKey: v.routingKey,
    spec: v.spec ? pb.RouteGroupSpec.toJSON(v.spec) : {},
    status: { ready: v.status?.ready ?? false, reason: v.status?.reason ?? "", message: v.status?.message ?? "" },
    endpoints: v.endpoints.map((e) => ({ name: e.name, url: e.url, target: e.target, ...(e.baselineUrl ? { baselineUrl: e.baselineUrl } : {}) })),
    sandboxes: v.sandboxes.map((s) => ({ name: s.name, routingKey: s.routingKey, ready: s.ready, routed: s.routed })),
    conflicts: v.conflicts.map((c) => ({ baseline: c.baseline, sandboxes: c.sandboxes })),
    createdAt: v.createdAt,
    updatedAt: v.updatedAt,
  };
}

/** The document of `eph jobrunnergroup get -o json|yaml` (a contract: scripts read it); the pod template as the object it was written as. */
export function jobRunnerGroupDoc(v: pb.JobRunnerGroupView): Record<string, unknown> {
  const spec = v.spec ? pb.JobRunnerGroupSpec.toJSON(v.spec) as Record<string, unknown> : {};
  if (v.spec?.podTemplate) spec.podTemplate = JSON.parse(v.spec.podTemplate) as unknown;
  return {
    name: v.name,
    spec,
    status: { ready: v.status?.ready ?? false, reason: v.status?.reason ?? "", message: v.status?.message ?? "", desiredPods: v.status?.desiredPods ?? 0,
      readyPods: v.status?.readyPods ?? 0, pods: v.status?.pods ?? [] },
    createdAt: v.createdAt,
    updatedAt: v.updatedAt,
  };
}

/** The document of `eph job get -o json|yaml` (a contract: scripts read it). */
export function jobDoc(v: pb.JobView): Record<string, unknown> {
  const s = v.status;
  return {
    name: v.name,
    submitter: v.submitter,
    routingKey: v.routingKey,
    spec: v.spec ? pb.JobSpec.toJSON(v.spec) : {},
    status: {
      state: s?.state ?? "", pod: s?.pod ?? "", ...(s?.exitCode !== undefined ? { exitCode: s.exitCode } : {}),
      reason: s?.reason ?? "", message: s?.message ?? "", queuedAt: s?.queuedAt ?? "", startedAt: s?.startedAt ?? "", endedAt: s?.endedAt ?? "",
      // The artifacts stored so far (`eph artifact download`), when there are any.
      ...(s?.artifacts.length ? { artifacts: s.artifacts.map((a) => ({ path: a.path, size: a.size, sha256: a.sha256, meta: { ...a.meta } })) } : {}),
    },
  };
}
