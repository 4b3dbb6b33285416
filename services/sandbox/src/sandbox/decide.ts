// The sandbox decider: create, delete, and the resource outcomes reported by workflows.
import type * as pb from "@ephemera/proto";
import { ev, type DomainEvent } from "@ephemera/events";
import { evolveSandbox, initialSandbox, type ResourceState, type SandboxRecord, type SandboxState } from "./state.js";
import { ConflictError, NotFoundError } from "@ephemera/kit";
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
        throw new ConflictError(
          `sandbox ${sandbox.name} exists with a different spec; updating a sandbox is not supported yet ` +
          `(delete it and apply again)`,
        );
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
      if (state.status !== "deleting" || r.status !== "Deprovisioning") return [];
      if (command.outcome === "failed") return [ev("ephemera.sandbox.resource_deprovision_failed.v1", { resource, workflowId, failure })];
      const after = state.resources.map((x): ResourceState => (x.name === resource ? { ...x, status: "Deprovisioned" } : x));
      return [
        ev("ephemera.sandbox.resource_deprovisioned.v1", { resource, workflowId }),
        ...(after.every((x) => x.status === "Deprovisioned") ? [ev("ephemera.sandbox.deleted.v1", { forced: false })] : []),
      ];
    }
  }
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
