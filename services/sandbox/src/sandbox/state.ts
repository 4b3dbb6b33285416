// The sandbox aggregate's state and its evolve, beside its decider: the sandbox service
// owns sandboxes; other services fold the published events into their own shapes.
import type * as pb from "@ephemera/proto";
import type { DomainEvent } from "@ephemera/events";

export type ResourceStatus = "Pending" | "Provisioning" | "Ready" | "Failed" | "Deprovisioning" | "Deprovisioned" | "DeprovisionFailed";

export interface ResourceState {
  name: string;
  plugin: string;
  version: string;
  params: Record<string, string>;
  status: ResourceStatus;
  outputs: pb.OutputRef[];
  failure?: pb.StepFailure;
  /** Retries asked for (eph sandbox retry): an outcome of an earlier try no longer counts. */
  retries: number;
  /** The same for the delete workflow (deleting again after a failed delete). */
  deprovisionRetries: number;
}

export type SandboxLifecycle = "none" | "active" | "deleting" | "deleted";

/** A sandbox that exists (or existed): what it was created with and what became of it. */
export interface SandboxRecord {
  status: "active" | "deleting" | "deleted";
  name: string;
  routingKey: string;
  cluster: string;
  spec?: pb.SandboxSpec;
  endpoints: pb.EndpointUrl[];
  resources: ResourceState[];
  ready: boolean;
  forced: boolean;
  createdAt: string;
  updatedAt: string;
  /** When the spec last changed (creation or the last update): TTL's `updatedAt`. */
  specUpdatedAt: string;
  /** Why it is being deleted: "requested" or "ttl". */
  deleteReason: string;
}

export type SandboxState = { status: "none" } | SandboxRecord;

export const initialSandbox = (): SandboxState => ({ status: "none" });

export function evolveSandbox(state: SandboxState, event: DomainEvent, time: string): SandboxState {
  if (event.type === "ephemera.sandbox.created.v1") {
    return {
        status: "active",
        name: event.data.name,
        routingKey: event.data.routingKey,
        cluster: event.data.spec?.cluster ?? "",
        spec: event.data.spec,
        endpoints: event.data.endpoints,
        resources: event.data.resources.map((r) => ({
          name: r.name, plugin: r.plugin, version: r.version, params: r.params, status: "Pending", outputs: [], retries: 0, deprovisionRetries: 0,
        })),
        ready: false,
        forced: false,
        createdAt: time,
        updatedAt: time,
        specUpdatedAt: time,
        deleteReason: "",
      };
  }
  if (state.status === "none") return state;
  const resource = (name: string, f: (r: ResourceState) => ResourceState): SandboxState => ({
    ...state,
    updatedAt: time,
    resources: state.resources.map((r) => (r.name === name ? f(r) : r)),
  });
  /** Resources asked to run a workflow again: their last failure no longer stands. */
  const again = (names: string[], f: (r: ResourceState) => ResourceState): SandboxState => {
    const retried = new Set(names);
    return {
      ...state,
      updatedAt: time,
      resources: state.resources.map((r) => {
        if (!retried.has(r.name)) return r;
        const { failure: _f, ...rest } = r;
        return f(rest);
      }),
    };
  };
  switch (event.type) {
    case "ephemera.sandbox.updated.v1":
      return {
        ...state,
        spec: event.data.spec,
        endpoints: event.data.endpoints,
        resources: [
          ...state.resources,
          ...event.data.added.map((r): ResourceState => ({
            name: r.name, plugin: r.plugin, version: r.version, params: r.params, status: "Pending", outputs: [], retries: 0, deprovisionRetries: 0,
          })),
        ],
        // Not ready until what it adds is; what it removes does not hold it back.
        ready: state.ready && event.data.added.length === 0,
        updatedAt: time,
        specUpdatedAt: time,
      };
    case "ephemera.sandbox.resource_provision_requested.v1":
      return resource(event.data.resource!.name, (r) => ({ ...r, status: "Provisioning" }));
    case "ephemera.sandbox.resource_provisioned.v1":
      return resource(event.data.resource, (r) => ({ ...r, status: "Ready", outputs: event.data.outputs }));
    case "ephemera.sandbox.resource_provision_failed.v1":
      return resource(event.data.resource, (r) => ({ ...r, status: "Failed", failure: event.data.failure }));
    case "ephemera.sandbox.ready.v1":
      return { ...state, ready: true, updatedAt: time };
    case "ephemera.sandbox.deleting.v1":
      return { ...state, status: "deleting", ready: false, forced: event.data.force, updatedAt: time, deleteReason: event.data.reason || "requested" };
    case "ephemera.sandbox.retry_requested.v1":
      return again(event.data.resources, (r) => ({ ...r, status: "Provisioning", retries: r.retries + 1 }));
    case "ephemera.sandbox.deprovision_retry_requested.v1":
      return again(event.data.resources, (r) => ({ ...r, status: "Deprovisioning", deprovisionRetries: r.deprovisionRetries + 1 }));
    case "ephemera.sandbox.resource_deprovision_requested.v1":
      return resource(event.data.resource!.name, (r) => ({ ...r, status: "Deprovisioning" }));
    case "ephemera.sandbox.resource_deprovisioned.v1":
      // In a live sandbox, a resource an update removed leaves it.
      if (state.status === "active") return { ...state, updatedAt: time, resources: state.resources.filter((r) => r.name !== event.data.resource) };
      return resource(event.data.resource, (r) => ({ ...r, status: "Deprovisioned" }));
    case "ephemera.sandbox.resource_deprovision_failed.v1":
      return resource(event.data.resource, (r) => ({ ...r, status: "DeprovisionFailed", failure: event.data.failure }));
    case "ephemera.sandbox.deleted.v1":
      return { ...state, status: "deleted", ready: false, forced: state.forced || event.data.forced, updatedAt: time };
    default:
      return state;
  }
}
