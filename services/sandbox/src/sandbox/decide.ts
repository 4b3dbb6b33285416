// The sandbox decider: create, delete, and the resource outcomes reported by workflows.
import type * as pb from "@ephemera/proto";
import { ev, type DomainEvent, type ResourceState, type SandboxState } from "@ephemera/events";
import { ConflictError, NotFoundError } from "@ephemera/kit";

export type SandboxCommand =
  | {
      kind: "create";
      sandbox: pb.Sandbox;
      resources: pb.ResolvedResource[];
      /** Minted by the caller: routing keys and URLs are random, deciders are not. */
      routingKey: string;
      endpoints: pb.EndpointUrl[];
      /** Canonical JSON of the spec, to tell a no-op re-apply from an update. */
      sameSpec: (existing: pb.SandboxSpec | undefined) => boolean;
    }
  | { kind: "delete"; force: boolean }
  | { kind: "workflow-ended"; resource: string; phase: "create" | "delete"; workflowId: string; outcome: "succeeded" | "failed"; outputs: pb.OutputRef[]; failure?: pb.StepFailure };

export function decideSandbox(command: SandboxCommand, state: SandboxState): DomainEvent[] {
  switch (command.kind) {
    case "create": {
      const { sandbox, resources, routingKey } = command;
      if (state.status === "active") {
        if (command.sameSpec(state.spec)) return [];
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
    case "delete": {
      if (state.status === "none" || state.status === "deleted") throw new NotFoundError(`sandbox ${state.name || "?"} not found`);
      if (command.force) {
        return [ev("ephemera.sandbox.deleting.v1", { force: true }), ev("ephemera.sandbox.deleted.v1", { forced: true })];
      }
      if (state.status === "deleting") return [];
      const toDeprovision = state.resources;
      return [
        ev("ephemera.sandbox.deleting.v1", { force: false }),
        ...toDeprovision.map((r) => ev("ephemera.sandbox.resource_deprovision_requested.v1", {
          sandbox: state.name, routingKey: state.routingKey, cluster: state.cluster,
          resource: { name: r.name, plugin: r.plugin, version: r.version, params: r.params },
        })),
        ...(toDeprovision.length === 0 ? [ev("ephemera.sandbox.deleted.v1", { forced: false })] : []),
      ];
    }
    case "workflow-ended": {
      const r = state.resources.find((x) => x.name === command.resource);
      if (!r || state.status === "deleted") return [];
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
