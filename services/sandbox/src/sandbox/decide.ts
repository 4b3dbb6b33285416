// The sandbox decider: create, delete, and the resource outcomes reported by workflows.
import * as pb from "@ephemera/proto";
import { ev, type DomainEvent } from "@ephemera/events";
import { evolveSandbox, initialSandbox, type ResourceState, type SandboxRecord, type SandboxState } from "./state.js";
import { ConflictError, NotFoundError, ValidationError, type FieldViolation } from "@ephemera/kit";
import { durationMs } from "@ephemera/spec";

export type SandboxCommand =
  | {
      kind: "create";
      sandbox: pb.Sandbox;
      resources: pb.ResolvedResource[];
      /** Minted by the caller: routing keys and URLs are random, deciders are not. */
      routingKey: string;
      endpoints: pb.EndpointUrl[];
      /** Canonical JSON of the spec, to tell a no-op re-apply from an update. */
      canonicalSpec: string;
      /** The canonical JSON of the spec it exists with, if it does. */
      existingSpec: string | undefined;
    }
  | { kind: "delete"; name: string; force: boolean }
  /** TTL: deletes the sandbox if it is due at `now` (ms since epoch). */
  | { kind: "expire"; now: number }
  | { kind: "retry"; name: string }
  | { kind: "workflow-ended"; resource: string; phase: "create" | "delete"; workflowId: string; outcome: "succeeded" | "failed"; outputs: pb.OutputRef[]; failure?: pb.StepFailure };

/** The sandbox aggregate as one value: its initial state, evolve and decide. */
export const sandboxDecider = {
  initialState: initialSandbox,
  evolve: evolveSandbox,
  decide: (command: SandboxCommand, state: SandboxState, _now: string) => decideSandbox(command, state),
};

export function decideSandbox(command: SandboxCommand, state: SandboxState): DomainEvent[] {
  switch (command.kind) {
    case "create": {
      const { sandbox, resources, routingKey } = command;
      if (state.status === "active") {
        if (command.existingSpec === command.canonicalSpec) return [];
        return decideUpdate(command, state);
      }
      if (state.status === "deleting") throw new ConflictError(`sandbox ${sandbox.name} is being deleted; apply again once it is gone`);
      const cluster = sandbox.spec?.cluster ?? "";
      return [
        ev("ephemera.sandbox.created.v1", { name: sandbox.name, routingKey, spec: sandbox.spec, endpoints: command.endpoints, resources }),
        ...resources.map((resource) => ev("ephemera.sandbox.resource_provision_requested.v1", { sandbox: sandbox.name, routingKey, cluster, resource })),
        ...(resources.length === 0 ? [ev("ephemera.sandbox.ready.v1", {})] : []),
      ];
    }
    case "expire": {
      const due = scheduledDeleteTime(state);
      if (state.status !== "active" || due === undefined || command.now < due) return [];
      return deprovisionAll(state, "ttl");
    }
    case "retry": {
      if (state.status !== "active") throw new ConflictError(`sandbox ${command.name} is ${state.status === "deleting" ? "being deleted" : "not there"}: nothing to retry`);
      const failed = state.resources.filter((r) => r.status === "Failed").map((r) => r.name);
      if (!failed.length) throw new ConflictError(`sandbox ${command.name} has no failed resource to retry`);
      return [ev("ephemera.sandbox.retry_requested.v1", { resources: failed })];
    }
    case "delete": {
      if (state.status === "none" || state.status === "deleted") throw new NotFoundError(`sandbox ${command.name} not found`);
      if (command.force) {
        return [ev("ephemera.sandbox.deleting.v1", { force: true, reason: "requested" }), ev("ephemera.sandbox.deleted.v1", { forced: true })];
      }
      if (state.status === "deleting") {
        // Deleting again after a failed delete runs the failed delete workflows again; while
        // one still runs there is nothing to do.
        const failed = state.resources.filter((r) => r.status === "DeprovisionFailed").map((r) => r.name);
        const running = state.resources.some((r) => r.status === "Deprovisioning");
        return failed.length && !running ? [ev("ephemera.sandbox.deprovision_retry_requested.v1", { resources: failed })] : [];
      }
      return deprovisionAll(state, "requested");
    }
    case "workflow-ended": {
      if (state.status === "none" || state.status === "deleted") return [];
      const r = state.resources.find((x) => x.name === command.resource);
      if (!r) return [];
      const { resource, workflowId, outputs, failure } = command;
      if (command.phase === "create") {
        if (state.status !== "active" || r.status !== "Provisioning") return [];
        if (command.outcome === "failed") return [ev("ephemera.sandbox.resource_provision_failed.v1", { resource, workflowId, failure })];
        const after = state.resources.map((x): ResourceState => (x.name === resource ? { ...x, status: "Ready" } : x));
        return [
          ev("ephemera.sandbox.resource_provisioned.v1", { resource, workflowId, outputs }),
          ...(after.every((x) => x.status === "Ready") ? [ev("ephemera.sandbox.ready.v1", {})] : []),
        ];
      }
      if (r.status !== "Deprovisioning") return [];
      if (command.outcome === "failed") return [ev("ephemera.sandbox.resource_deprovision_failed.v1", { resource, workflowId, failure })];
      if (state.status === "active") {
        // A resource an update removed: gone from the sandbox, which is ready if the rest is.
        const rest = state.resources.filter((x) => x.name !== resource);
        return [
          ev("ephemera.sandbox.resource_deprovisioned.v1", { resource, workflowId }),
          ...(!state.ready && rest.every((x) => x.status === "Ready") ? [ev("ephemera.sandbox.ready.v1", {})] : []),
        ];
      }
      const after = state.resources.map((x): ResourceState => (x.name === resource ? { ...x, status: "Deprovisioned" } : x));
      return [
        ev("ephemera.sandbox.resource_deprovisioned.v1", { resource, workflowId }),
        ...(after.every((x) => x.status === "Deprovisioned") ? [ev("ephemera.sandbox.deleted.v1", { forced: false })] : []),
      ];
    }
  }
}

const SandboxSpecJson = (spec: pb.SandboxSpec) => pb.SandboxSpec.toJSON(spec);
/** JSON with object keys sorted at every level: key order does not make a change. */
const canonicalJson = (v: unknown): string => {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(",")}]`;
  if (v && typeof v === "object") {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson((v as Record<string, unknown>)[k])}`).join(",")}}`;
  }
  return JSON.stringify(v ?? null);
};

/**
 * A re-apply with a changed spec (seed 003's rules): name, cluster and each existing
 * resource's plugin and params are immutable (every one that changed is named, nothing is
 * written); while a resource's workflow runs the update is refused; otherwise the spec is
 * replaced in place, keeping the routing key and, by name, the endpoints' URLs. Added
 * resources run their create workflow, removed ones their delete workflow; the others are
 * not touched.
 */
function decideUpdate(command: Extract<SandboxCommand, { kind: "create" }>, state: SandboxRecord): DomainEvent[] {
  const { sandbox, resources } = command;
  const next = sandbox.spec!;
  const before = state.spec;
  const beforeResources = new Map((before?.resources ?? []).map((r) => [r.name, r]));
  const violations: FieldViolation[] = [];
  if (next.cluster !== state.cluster) {
    violations.push({ field: "spec.cluster", rule: "immutable", description: `the cluster cannot change ("${state.cluster}" → "${next.cluster}"); delete the sandbox and apply it again` });
  }
  next.resources.forEach((r, i) => {
    const old = beforeResources.get(r.name);
    if (!old) return;
    if (old.plugin !== r.plugin) {
      violations.push({ field: `spec.resources[${i}].plugin`, rule: "immutable", description: `resource ${r.name}'s plugin cannot change ("${old.plugin}" → "${r.plugin}"): resources are not updated; remove it and add one under another name` });
    }
    const keys = [...new Set([...Object.keys(old.params), ...Object.keys(r.params)])].filter((k) => old.params[k] !== r.params[k]).sort();
    if (keys.length) {
      violations.push({ field: `spec.resources[${i}].params`, rule: "immutable", description: `resource ${r.name}'s params cannot change (changed: ${keys.join(", ")}): resources are not updated; remove it and add one under another name` });
    }
  });
  if (violations.length) throw new ValidationError(violations, `sandbox ${sandbox.name} cannot be updated so`);
  const busy = state.resources.filter((r) => r.status === "Provisioning" || r.status === "Deprovisioning");
  if (busy.length) {
    throw new ConflictError(
      `sandbox ${sandbox.name} cannot be updated while a workflow runs (${busy.map((r) => `${r.name}: ${r.status}`).join(", ")}); ` +
      "apply again once it has ended",
    );
  }
  const added = resources.filter((r) => !beforeResources.has(r.name));
  const removed = state.resources.filter((r) => !next.resources.some((n) => n.name === r.name));
  const changes = specChanges(before, next);
  return [
    ev("ephemera.sandbox.updated.v1", { spec: next, endpoints: command.endpoints, added, removed: removed.map((r) => r.name), changes }),
    ...added.map((resource) => ev("ephemera.sandbox.resource_provision_requested.v1", { sandbox: sandbox.name, routingKey: state.routingKey, cluster: state.cluster, resource })),
    ...removed.map((r) => ev("ephemera.sandbox.resource_deprovision_requested.v1", {
      sandbox: state.name, routingKey: state.routingKey, cluster: state.cluster,
      resource: { name: r.name, plugin: r.plugin, version: r.version, params: r.params },
    })),
  ];
}

/** The top-level spec fields that differ, old and new as JSON (for `sandbox.updated`, an audit record). */
function specChanges(before: pb.SandboxSpec | undefined, after: pb.SandboxSpec): pb.SpecChange[] {
  const a = (before ? SandboxSpecJson(before) : {}) as Record<string, unknown>;
  const b = SandboxSpecJson(after) as Record<string, unknown>;
  const fields = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  return fields
    .filter((f) => canonicalJson(a[f]) !== canonicalJson(b[f]))
    .map((f) => ({ field: `spec.${f}`, oldJson: JSON.stringify(a[f] ?? null), newJson: JSON.stringify(b[f] ?? null) }));
}

function deprovisionAll(state: SandboxRecord, reason: string): DomainEvent[] {
  return [
    ev("ephemera.sandbox.deleting.v1", { force: false, reason }),
    ...state.resources.map((r) => ev("ephemera.sandbox.resource_deprovision_requested.v1", {
      sandbox: state.name, routingKey: state.routingKey, cluster: state.cluster,
      resource: { name: r.name, plugin: r.plugin, version: r.version, params: r.params },
    })),
    ...(state.resources.length === 0 ? [ev("ephemera.sandbox.deleted.v1", { forced: false })] : []),
  ];
}

/** When TTL expiry deletes the sandbox (ms since epoch); undefined without a ttl. */
export function scheduledDeleteTime(state: SandboxState): number | undefined {
  if (state.status === "none") return undefined;
  const ttl = state.spec?.ttl;
  const span = durationMs(ttl?.duration);
  if (span === undefined) return undefined;
  const from = ttl?.offsetFrom === "updatedAt" ? state.specUpdatedAt : state.createdAt;
  return Date.parse(from) + span;
}
