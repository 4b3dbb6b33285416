// The sandbox aggregate's state and its evolve, beside its decider: the sandbox service
// owns sandboxes; other services fold the published events into their own shapes.
import * as pb from "@ephemera/proto";
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

/** The sandbox's forks as the sandbox records them: what it asked of its cluster and what it heard back. */
export interface ForksState {
  /** Bumped by every spec that changes the forks (1 for a sandbox created with forks); 0: never had any. */
  generation: number;
  /** The generation last asked of the cluster (0: never asked). */
  requested: number;
  /** How many forks that request holds (0: remove them all). */
  requestedCount: number;
  /** The last generation the cluster reported available (or skipped). */
  available: number;
  /** The cluster runs no workloads: nothing of the forks is on it. */
  skipped: boolean;
  /** Why the requested generation could not be applied. */
  failure?: pb.ForkFailure;
}

const noForks = (): ForksState => ({ generation: 0, requested: 0, requestedCount: 0, available: 0, skipped: false });

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
  forks: ForksState;
}

export type SandboxState = { status: "none" } | SandboxRecord;

/**
 * The forks as the cluster runs them: their deprecated `endpoints` are kept as written and
 * run nothing, so changing only those is no new generation (and leaves a ready sandbox ready).
 */
const forkWorkloads = (spec: pb.SandboxSpec | undefined) =>
  JSON.stringify((spec?.forks ?? []).map((f) => pb.Fork.toJSON({ ...f, endpoints: [] })));

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
        forks: { ...noForks(), generation: event.data.spec?.forks.length ? 1 : 0 },
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
    case "ephemera.sandbox.updated.v1": {
      const forksChanged = event.data.changes.some((c) => c.field === "spec.forks")
        && forkWorkloads(state.spec) !== forkWorkloads(event.data.spec);
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
        // Not ready until what it adds is, and changed forks are available; what it removes does not hold it back.
        ready: state.ready && event.data.added.length === 0 && !forksChanged,
        updatedAt: time,
        specUpdatedAt: time,
        // Changed forks are the next generation; a failure of the last one no longer stands (the change may be its fix).
        forks: forksChanged ? (({ failure: _f, ...f }) => ({ ...f, generation: Math.max(f.generation, f.requested) + 1 }))(state.forks) : state.forks,
      };
    }
    case "ephemera.sandbox.forks_requested.v1": {
      const { failure: _f, ...forks } = state.forks;
      const generation = event.data.generation;
      return {
        ...state, updatedAt: time,
        forks: { ...forks, generation: Math.max(forks.generation, generation), requested: generation, requestedCount: event.data.forks.length },
      };
    }
    case "ephemera.sandbox.forks_available.v1":
      return { ...state, updatedAt: time, forks: { ...state.forks, available: event.data.generation, skipped: event.data.skipped } };
    case "ephemera.sandbox.forks_failed.v1":
      return { ...state, updatedAt: time, forks: { ...state.forks, ...(event.data.failure ? { failure: event.data.failure } : {}) } };
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
    case "ephemera.sandbox.retry_requested.v1": {
      const retried = again(event.data.resources, (r) => ({ ...r, status: "Provisioning", retries: r.retries + 1 }));
      if (retried.status === "none" || !state.forks.failure) return retried;
      // Failed forks are asked for again, as a new generation, once every resource is ready.
      const { failure: _f, ...forks } = state.forks;
      return { ...retried, forks: { ...forks, generation: Math.max(forks.generation, forks.requested) + 1 } };
    }
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
