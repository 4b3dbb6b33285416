// The sandbox decider: create, delete, and the resource outcomes reported by workflows.
import * as pb from "@ephemera/proto";
import { ev, workflowId, type DomainEvent } from "@ephemera/events";
import { evolveSandbox, initialSandbox, type ResourceState, type SandboxRecord, type SandboxState } from "./state.js";
import { ConflictError, NotFoundError, ValidationError, parseDuration, type FieldViolation } from "@ephemera/kit";

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
  | { kind: "workflow-ended"; resource: string; phase: "create" | "delete"; workflowId: string; outcome: "succeeded" | "failed"; outputs: pb.OutputRef[]; failure?: pb.StepFailure }
  /** What the cluster's runner reported of a generation of the sandbox's forks. */
  | { kind: "forks-reported"; generation: number; outcome: "available" | "skipped" | "failed"; failure?: pb.ForkFailure };

/** A spec as the create command compares them (canonicalSpec, existingSpec). */
export const canonicalSpec = (spec: pb.SandboxSpec | undefined) =>
  JSON.stringify(pb.SandboxSpec.toJSON(spec ?? pb.SandboxSpec.fromPartial({})));

/** The sandbox aggregate as one value: its initial state, evolve and decide. */
export const sandboxDecider = {
  initialState: initialSandbox,
  evolve: evolveSandbox,
  decide: (command: SandboxCommand, state: SandboxState, _now: string) => decideSandbox(command, state),
};

export function decideSandbox(command: SandboxCommand, state: SandboxState): DomainEvent[] {
  const events = decideOnly(command, state);
  return events.length ? settle(state, events) : events;
}

/**
 * What follows from a decision once its events are folded in: a live sandbox whose
 * resources are all ready asks its cluster for the forks its spec has (when it has not
 * asked for this generation yet), and is ready once they are available.
 */
function settle(before: SandboxState, events: DomainEvent[]): DomainEvent[] {
  const s = events.reduce((st, e) => evolveSandbox(st, e, ""), before);
  if (s.status !== "active" || !s.resources.every((r) => r.status === "Ready") || s.forks.failure) return events;
  if (forksWanted(s)) return [...events, forksRequested(s, s.forks.generation, s.spec?.forks ?? [])];
  if (!s.ready && forksSettled(s)) return [...events, ev("ephemera.sandbox.ready.v1", {})];
  return events;
}

/** A generation of forks not asked for yet (a sandbox that never had any on its cluster asks for none). */
const forksWanted = (s: SandboxRecord) => s.forks.generation > s.forks.requested && ((s.spec?.forks.length ?? 0) > 0 || s.forks.requested > 0);

/** Whether the forks are as the spec wants them: available, or none wanted and none asked for. */
const forksSettled = (s: SandboxRecord) =>
  s.forks.requested === 0 ? (s.spec?.forks.length ?? 0) === 0 : s.forks.requested >= s.forks.generation && s.forks.available === s.forks.requested;

/** Whether the cluster may hold forks of the sandbox: something was asked, and neither skipped nor all removed since. */
const forksOnCluster = (s: SandboxRecord) =>
  s.forks.requested > 0 && !(s.forks.available === s.forks.requested && (s.forks.skipped || s.forks.requestedCount === 0));

const forksRequested = (s: SandboxRecord, generation: number, forks: pb.Fork[]) => ev("ephemera.sandbox.forks_requested.v1", {
  sandbox: s.name, routingKey: s.routingKey, cluster: s.cluster, generation, forks, resources: s.resources.map((r) => r.name),
});

function decideOnly(command: SandboxCommand, state: SandboxState): DomainEvent[] {
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
      // Resources an update removed whose delete workflow failed: their removal runs again.
      const removals = state.resources.filter((r) => r.status === "DeprovisionFailed").map((r) => r.name);
      if (!failed.length && !removals.length && !state.forks.failure) {
        throw new ConflictError(`sandbox ${command.name} has no failed resource, removal or fork to retry`);
      }
      return [
        ...(failed.length || state.forks.failure ? [ev("ephemera.sandbox.retry_requested.v1", { resources: failed })] : []),
        ...(removals.length ? [ev("ephemera.sandbox.deprovision_retry_requested.v1", { resources: removals })] : []),
      ];
    }
    case "delete": {
      if (state.status === "none" || state.status === "deleted") throw new NotFoundError(`sandbox ${command.name} not found`);
      if (command.force) {
        return [ev("ephemera.sandbox.deleting.v1", { force: true, reason: "requested" }), ev("ephemera.sandbox.deleted.v1", { forced: true })];
      }
      if (state.status === "deleting") {
        // Forks that could not be removed are asked to be removed again.
        if (state.forks.failure) return [forksRequested(state, state.forks.generation + 1, [])];
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
        return [ev("ephemera.sandbox.resource_provisioned.v1", { resource, workflowId, outputs })];
      }
      if (r.status !== "Deprovisioning") return [];
      if (command.outcome === "failed") return [ev("ephemera.sandbox.resource_deprovision_failed.v1", { resource, workflowId, failure })];
      // A resource an update removed: gone from the sandbox, which is ready if the rest is (settle).
      if (state.status === "active") return [ev("ephemera.sandbox.resource_deprovisioned.v1", { resource, workflowId })];
      const after = state.resources.map((x): ResourceState => (x.name === resource ? { ...x, status: "Deprovisioned" } : x));
      return [
        ev("ephemera.sandbox.resource_deprovisioned.v1", { resource, workflowId }),
        ...(after.every((x) => x.status === "Deprovisioned") ? [ev("ephemera.sandbox.deleted.v1", { forced: false })] : []),
      ];
    }
    case "forks-reported": {
      if (state.status === "none" || state.status === "deleted") return [];
      const { generation } = command;
      // Only the answer to the last request counts; each is recorded once.
      if (generation !== state.forks.requested || state.forks.available === generation || state.forks.failure) return [];
      if (command.outcome === "failed") return [ev("ephemera.sandbox.forks_failed.v1", { generation, failure: command.failure })];
      const available = ev("ephemera.sandbox.forks_available.v1", { generation, skipped: command.outcome === "skipped" });
      // Deleting: the forks are gone from the cluster, so the resources they used may go now.
      return state.status === "deleting" ? [available, ...deprovisionResources(state)] : [available];
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
 * resource's plugin version and params are immutable (every one that changed is named,
 * nothing is written). What leaves the resources as they are (labels, description, TTL,
 * endpoints, forks) is taken at any time, even while a resource's workflow runs; adding or
 * removing a resource is refused while one runs (`busyRefusal`). The spec is replaced in
 * place, keeping the routing key and, by name, the endpoints' URLs. Added resources run
 * their create workflow, removed ones their delete workflow; the others are not touched.
 *
 * `command.resources` are resolved: a resource the sandbox already runs comes with the
 * version it runs when its ref allows it (the caller resolves so), and with the version
 * its ref names otherwise, which is then refused here as a change.
 */
function decideUpdate(command: Extract<SandboxCommand, { kind: "create" }>, state: SandboxRecord): DomainEvent[] {
  const { sandbox, resources } = command;
  const next = sandbox.spec!;
  const before = state.spec;
  const inSpec = new Set((before?.resources ?? []).map((r) => r.name));
  const violations: FieldViolation[] = [];
  if (next.cluster !== state.cluster) {
    violations.push({ field: "spec.cluster", rule: "immutable", description: `the cluster cannot change ("${state.cluster}" → "${next.cluster}"); delete the sandbox and apply it again` });
  }
  next.resources.forEach((r, i) => {
    const old = inSpec.has(r.name) ? state.resources.find((x) => x.name === r.name) : undefined;
    if (!old) return;
    const now = resources.find((x) => x.name === r.name);
    if (now && (now.plugin !== old.plugin || now.version !== old.version)) {
      violations.push({
        field: `spec.resources[${i}].plugin`, rule: "immutable",
        description: `resource ${r.name} runs ${old.plugin}@${old.version} and its plugin cannot change ` +
          `("${r.plugin}" is ${now.plugin}@${now.version}): ` +
          `resources are not updated; name ${old.plugin}@${old.version} (or ${old.plugin} alone), or remove it and add one under another name`,
      });
    }
    const keys = [...new Set([...Object.keys(old.params), ...Object.keys(r.params)])].filter((k) => old.params[k] !== r.params[k]).sort();
    if (keys.length) {
      violations.push({ field: `spec.resources[${i}].params`, rule: "immutable", description: `resource ${r.name}'s params cannot change (changed: ${keys.join(", ")}): resources are not updated; remove it and add one under another name` });
    }
  });
  if (violations.length) throw new ValidationError(violations, `sandbox ${sandbox.name} cannot be updated so`);
  const added = resources.filter((r) => !inSpec.has(r.name));
  // What this apply removes: a resource an earlier update removed is already on its way out.
  const removed = state.resources.filter((r) => inSpec.has(r.name) && !next.resources.some((n) => n.name === r.name));
  if (added.length || removed.length) busyRefusal(state, added.map((r) => r.name), removed.map((r) => r.name));
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

/**
 * Adding or removing resources waits for no workflow: it is refused while any runs, naming
 * each (resource, phase, workflow id). Refused rather than queued: an apply is taken whole
 * or not at all, so what the sandbox runs is always the last spec accepted, and a queued
 * change would be decided against an outcome not known yet (a create that fails, a delete
 * that must first cancel a create). A name still held by a resource whose removal failed
 * cannot be added again.
 */
function busyRefusal(state: SandboxRecord, added: string[], removed: string[]): void {
  const what = [added.length ? `add ${added.join(", ")}` : "", removed.length ? `remove ${removed.join(", ")}` : ""].filter(Boolean).join(" and ");
  const running = state.resources.flatMap((r) => {
    const phase = r.status === "Provisioning" ? "create" : r.status === "Deprovisioning" ? "delete" : undefined;
    return phase ? [`the ${phase} workflow of resource ${r.name} (${workflowId(state.routingKey, r.name, phase)})`] : [];
  });
  if (running.length) {
    throw new ConflictError(
      `sandbox ${state.name} cannot ${what} while a workflow runs: ${running.join(", ")}; apply again once it has ended ` +
      `(eph sandbox get ${state.name} shows each resource's status), or apply without adding or removing resources now ` +
      "(labels, description, ttl, endpoints and forks may change at any time)",
    );
  }
  const held = state.resources.filter((r) => added.includes(r.name));
  if (held.length) {
    throw new ConflictError(
      `sandbox ${state.name} cannot add ${held.map((r) => r.name).join(", ")}: an earlier update removed a resource of that name and ` +
      `its delete workflow failed (${held.map((r) => workflowId(state.routingKey, r.name, "delete")).join(", ")}); add it under another name`,
    );
  }
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

/**
 * Deleting: the forks go first (removed from the cluster, which answers), then the
 * resources' delete workflows run; without forks on the cluster, the resources go at once.
 */
function deprovisionAll(state: SandboxRecord, reason: string): DomainEvent[] {
  const deleting = ev("ephemera.sandbox.deleting.v1", { force: false, reason });
  if (forksOnCluster(state)) return [deleting, forksRequested(state, state.forks.generation + 1, [])];
  return [deleting, ...deprovisionResources(state)];
}

function deprovisionResources(state: SandboxRecord): DomainEvent[] {
  return [
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
  const span = parseDuration(ttl?.duration ?? "");
  if (span === undefined) return undefined;
  const from = ttl?.offsetFrom === "updatedAt" ? state.specUpdatedAt : state.createdAt;
  return Date.parse(from) + span;
}
