// What the scheduler knows of other aggregates, folded from their published events into
// its own shapes: the resources sandboxes ask for, and the plugin versions' specs.
import type * as pb from "@ephemera/proto";
import type { DomainEvent } from "@ephemera/events";

export interface RequestedResource {
  name: string;
  plugin: string;
  version: string;
  params: Record<string, string>;
  /** Asked to be provisioned; then to be deprovisioned. */
  provision: boolean;
  deprovision: boolean;
  /** How many times a retry of its create workflow was asked for. */
  retries: number;
  /** How many times a retry of its delete workflow was asked for (deleting again after a failed delete). */
  deprovisionRetries: number;
}

export interface SandboxFacts {
  name: string;
  routingKey: string;
  cluster: string;
  deleting: boolean;
  deleted: boolean;
  forced: boolean;
  resources: RequestedResource[];
}

export const noSandbox = (): SandboxFacts | undefined => undefined;

export function foldSandbox(state: SandboxFacts | undefined, e: DomainEvent): SandboxFacts | undefined {
  const resource = (name: string, f: (r: RequestedResource) => RequestedResource) =>
    state && { ...state, resources: state.resources.map((r) => (r.name === name ? f(r) : r)) };
  switch (e.type) {
    case "ephemera.sandbox.created.v1":
      return {
        name: e.data.name, routingKey: e.data.routingKey, cluster: e.data.spec?.cluster ?? "", deleting: false, deleted: false,
        forced: false,
        resources: e.data.resources.map((r) => ({ ...r, provision: false, deprovision: false, retries: 0, deprovisionRetries: 0 })),
      };
    case "ephemera.sandbox.updated.v1":
      // Resources an update adds; those it removes get a deprovision request of their own.
      return state && {
        ...state,
        resources: [...state.resources, ...e.data.added.map((r) => ({ ...r, provision: false, deprovision: false, retries: 0, deprovisionRetries: 0 }))],
      };
    case "ephemera.sandbox.resource_provision_requested.v1":
      return resource(e.data.resource!.name, (r) => ({ ...r, provision: true }));
    case "ephemera.sandbox.resource_deprovision_requested.v1":
      return resource(e.data.resource!.name, (r) => ({ ...r, deprovision: true }));
    case "ephemera.sandbox.deleting.v1":
      return state && { ...state, deleting: true, forced: state.forced || e.data.force };
    case "ephemera.sandbox.deleted.v1":
      return state && { ...state, deleting: true, deleted: true, forced: state.forced || e.data.forced };
    case "ephemera.sandbox.deprovision_retry_requested.v1": {
      const again = new Set(e.data.resources);
      return state && { ...state, resources: state.resources.map((r) => (again.has(r.name) ? { ...r, deprovisionRetries: r.deprovisionRetries + 1 } : r)) };
    }
    case "ephemera.sandbox.retry_requested.v1": {
      const again = new Set(e.data.resources);
      return state && { ...state, resources: state.resources.map((r) => (again.has(r.name) ? { ...r, retries: r.retries + 1 } : r)) };
    }
    default:
      return state;
  }
}

/** Published versions by version string (a version asked to be deleted still runs its sandboxes). */
export type PluginFacts = Map<string, pb.ResourcePluginSpec>;

export const noPlugin = (): PluginFacts => new Map();

export function foldPlugin(state: PluginFacts, e: DomainEvent): PluginFacts {
  switch (e.type) {
    case "ephemera.plugin.published.v1":
      return new Map(state).set(e.data.version, e.data.spec!);
    case "ephemera.plugin.version_deleted.v1": {
      const next = new Map(state);
      next.delete(e.data.version);
      return next;
    }
    default:
      return state;
  }
}
