// The typed events of ephemera: type strings, their proto payloads, and the aggregate
// ids. Payloads are stored as canonical proto3 JSON.
import * as pb from "@ephemera/proto";

/** An event as any store records it: what decoding needs, without depending on a store. */
export interface StoredEvent {
  type: string;
  data: unknown;
  time: string;
}

/** An event ready to append: its type and its canonical proto3 JSON. */
export interface EncodedEvent {
  type: string;
  data: unknown;
}

interface Codec<T> {
  toJSON(m: T): unknown;
  fromJSON(o: unknown): T;
  fromPartial(o: never): T;
}

/** The payload of each event type. */
export interface EventPayloads {
  "ephemera.plugin.published.v1": pb.ResourcePluginPublished;
  "ephemera.plugin.version_delete_requested.v1": pb.ResourcePluginVersionDeleteRequested;
  "ephemera.plugin.version_deleted.v1": pb.ResourcePluginVersionDeleted;
  "ephemera.sandbox.created.v1": pb.SandboxCreated;
  "ephemera.sandbox.updated.v1": pb.SandboxUpdated;
  "ephemera.sandbox.resource_provision_requested.v1": pb.ResourceProvisionRequested;
  "ephemera.sandbox.resource_provisioned.v1": pb.ResourceProvisioned;
  "ephemera.sandbox.resource_provision_failed.v1": pb.ResourceProvisionFailed;
  "ephemera.sandbox.ready.v1": pb.SandboxReady;
  "ephemera.sandbox.deleting.v1": pb.SandboxDeleting;
  "ephemera.sandbox.retry_requested.v1": pb.SandboxRetryRequested;
  "ephemera.sandbox.deprovision_retry_requested.v1": pb.SandboxDeprovisionRetryRequested;
  "ephemera.sandbox.resource_deprovision_requested.v1": pb.ResourceDeprovisionRequested;
  "ephemera.sandbox.resource_deprovisioned.v1": pb.ResourceDeprovisioned;
  "ephemera.sandbox.resource_deprovision_failed.v1": pb.ResourceDeprovisionFailed;
  "ephemera.sandbox.deleted.v1": pb.SandboxDeleted;
  "ephemera.sandbox.forks_requested.v1": pb.SandboxForksRequested;
  "ephemera.sandbox.forks_available.v1": pb.SandboxForksAvailable;
  "ephemera.sandbox.forks_failed.v1": pb.SandboxForksFailed;
  "ephemera.routegroup.created.v1": pb.RouteGroupCreated;
  "ephemera.routegroup.updated.v1": pb.RouteGroupUpdated;
  "ephemera.routegroup.deleted.v1": pb.RouteGroupDeleted;
  "ephemera.tunnel.session_opened.v1": pb.TunnelSessionOpened;
  "ephemera.tunnel.connection_closed.v1": pb.TunnelConnectionClosed;
  "ephemera.tunnel.session_closed.v1": pb.TunnelSessionClosed;
  "ephemera.locals.connected.v1": pb.LocalConnected;
  "ephemera.locals.disconnected.v1": pb.LocalDisconnected;
  "ephemera.jobrunnergroup.created.v1": pb.JobRunnerGroupCreated;
  "ephemera.jobrunnergroup.updated.v1": pb.JobRunnerGroupUpdated;
  "ephemera.jobrunnergroup.deleted.v1": pb.JobRunnerGroupDeleted;
  "ephemera.jobrunnergroup.pods_reported.v1": pb.JobRunnerGroupPodsReported;
  "ephemera.job.submitted.v1": pb.JobSubmitted;
  "ephemera.job.assigned.v1": pb.JobAssigned;
  "ephemera.job.succeeded.v1": pb.JobSucceeded;
  "ephemera.job.failed.v1": pb.JobFailed;
  "ephemera.job.cancel_requested.v1": pb.JobCancelRequested;
  "ephemera.job.cancelled.v1": pb.JobCancelled;
  "ephemera.job.artifact_stored.v1": pb.JobArtifactStored;
  "ephemera.forks.applied.v1": pb.ForksApplied;
  "ephemera.forks.available.v1": pb.ForksAvailable;
  "ephemera.forks.failed.v1": pb.ForksFailed;
  "ephemera.forks.skipped.v1": pb.ForksSkipped;
  "ephemera.forks.locals_applied.v1": pb.LocalsApplied;
  "ephemera.workflow.started.v1": pb.WorkflowStarted;
  "ephemera.workflow.step_dispatched.v1": pb.WorkflowStepDispatched;
  "ephemera.workflow.step_started.v1": pb.WorkflowStepStarted;
  "ephemera.workflow.step_unclaimed.v1": pb.WorkflowStepUnclaimed;
  "ephemera.workflow.step_retry_scheduled.v1": pb.WorkflowStepRetryScheduled;
  "ephemera.workflow.run_stop_requested.v1": pb.WorkflowRunStopRequested;
  "ephemera.workflow.retried.v1": pb.WorkflowRetried;
  "ephemera.workflow.step_succeeded.v1": pb.WorkflowStepSucceeded;
  "ephemera.workflow.step_failed.v1": pb.WorkflowStepFailed;
  "ephemera.workflow.succeeded.v1": pb.WorkflowSucceeded;
  "ephemera.workflow.failed.v1": pb.WorkflowFailed;
  "ephemera.workflow.cancel_requested.v1": pb.WorkflowCancelRequested;
  "ephemera.workflow.cancelled.v1": pb.WorkflowCancelled;
  "ephemera.steprun.started.v1": pb.StepRunStarted;
  "ephemera.steprun.succeeded.v1": pb.StepRunSucceeded;
  "ephemera.steprun.failed.v1": pb.StepRunFailed;
  "ephemera.outputs.dropped.v1": pb.OutputsDropped;
  "ephemera.deadletter.recorded.v1": pb.DeadLetterRecorded;
}

const codecs: { [K in keyof EventPayloads]: Codec<EventPayloads[K]> } = {
  "ephemera.plugin.published.v1": pb.ResourcePluginPublished,
  "ephemera.plugin.version_delete_requested.v1": pb.ResourcePluginVersionDeleteRequested,
  "ephemera.plugin.version_deleted.v1": pb.ResourcePluginVersionDeleted,
  "ephemera.sandbox.created.v1": pb.SandboxCreated,
  "ephemera.sandbox.updated.v1": pb.SandboxUpdated,
  "ephemera.sandbox.resource_provision_requested.v1": pb.ResourceProvisionRequested,
  "ephemera.sandbox.resource_provisioned.v1": pb.ResourceProvisioned,
  "ephemera.sandbox.resource_provision_failed.v1": pb.ResourceProvisionFailed,
  "ephemera.sandbox.ready.v1": pb.SandboxReady,
  "ephemera.sandbox.deleting.v1": pb.SandboxDeleting,
  "ephemera.sandbox.retry_requested.v1": pb.SandboxRetryRequested,
  "ephemera.sandbox.deprovision_retry_requested.v1": pb.SandboxDeprovisionRetryRequested,
  "ephemera.sandbox.resource_deprovision_requested.v1": pb.ResourceDeprovisionRequested,
  "ephemera.sandbox.resource_deprovisioned.v1": pb.ResourceDeprovisioned,
  "ephemera.sandbox.resource_deprovision_failed.v1": pb.ResourceDeprovisionFailed,
  "ephemera.sandbox.deleted.v1": pb.SandboxDeleted,
  "ephemera.sandbox.forks_requested.v1": pb.SandboxForksRequested,
  "ephemera.sandbox.forks_available.v1": pb.SandboxForksAvailable,
  "ephemera.sandbox.forks_failed.v1": pb.SandboxForksFailed,
  "ephemera.routegroup.created.v1": pb.RouteGroupCreated,
  "ephemera.routegroup.updated.v1": pb.RouteGroupUpdated,
  "ephemera.routegroup.deleted.v1": pb.RouteGroupDeleted,
  "ephemera.tunnel.session_opened.v1": pb.TunnelSessionOpened,
  "ephemera.tunnel.connection_closed.v1": pb.TunnelConnectionClosed,
  "ephemera.tunnel.session_closed.v1": pb.TunnelSessionClosed,
  "ephemera.locals.connected.v1": pb.LocalConnected,
  "ephemera.locals.disconnected.v1": pb.LocalDisconnected,
  "ephemera.jobrunnergroup.created.v1": pb.JobRunnerGroupCreated,
  "ephemera.jobrunnergroup.updated.v1": pb.JobRunnerGroupUpdated,
  "ephemera.jobrunnergroup.deleted.v1": pb.JobRunnerGroupDeleted,
  "ephemera.jobrunnergroup.pods_reported.v1": pb.JobRunnerGroupPodsReported,
  "ephemera.job.submitted.v1": pb.JobSubmitted,
  "ephemera.job.assigned.v1": pb.JobAssigned,
  "ephemera.job.succeeded.v1": pb.JobSucceeded,
  "ephemera.job.failed.v1": pb.JobFailed,
  "ephemera.job.cancel_requested.v1": pb.JobCancelRequested,
  "ephemera.job.cancelled.v1": pb.JobCancelled,
  "ephemera.job.artifact_stored.v1": pb.JobArtifactStored,
  "ephemera.forks.applied.v1": pb.ForksApplied,
  "ephemera.forks.available.v1": pb.ForksAvailable,
  "ephemera.forks.failed.v1": pb.ForksFailed,
  "ephemera.forks.skipped.v1": pb.ForksSkipped,
  "ephemera.forks.locals_applied.v1": pb.LocalsApplied,
  "ephemera.workflow.started.v1": pb.WorkflowStarted,
  "ephemera.workflow.step_dispatched.v1": pb.WorkflowStepDispatched,
  "ephemera.workflow.step_started.v1": pb.WorkflowStepStarted,
  "ephemera.workflow.step_unclaimed.v1": pb.WorkflowStepUnclaimed,
  "ephemera.workflow.step_retry_scheduled.v1": pb.WorkflowStepRetryScheduled,
  "ephemera.workflow.run_stop_requested.v1": pb.WorkflowRunStopRequested,
  "ephemera.workflow.retried.v1": pb.WorkflowRetried,
  "ephemera.workflow.step_succeeded.v1": pb.WorkflowStepSucceeded,
  "ephemera.workflow.step_failed.v1": pb.WorkflowStepFailed,
  "ephemera.workflow.succeeded.v1": pb.WorkflowSucceeded,
  "ephemera.workflow.failed.v1": pb.WorkflowFailed,
  "ephemera.workflow.cancel_requested.v1": pb.WorkflowCancelRequested,
  "ephemera.workflow.cancelled.v1": pb.WorkflowCancelled,
  "ephemera.steprun.started.v1": pb.StepRunStarted,
  "ephemera.steprun.succeeded.v1": pb.StepRunSucceeded,
  "ephemera.steprun.failed.v1": pb.StepRunFailed,
  "ephemera.outputs.dropped.v1": pb.OutputsDropped,
  "ephemera.deadletter.recorded.v1": pb.DeadLetterRecorded,
};

export type EventType = keyof EventPayloads;
type Payload<K extends EventType> = EventPayloads[K];

/** An event as domain code sees it: a discriminated union on `type`. */
export type DomainEvent = { [K in EventType]: { type: K; data: Payload<K> } }[EventType];
export type EventOf<K extends EventType> = Extract<DomainEvent, { type: K }>;

export const EVENT_TYPES = Object.keys(codecs) as EventType[];

export function isEventType(t: string): t is EventType {
  return Object.prototype.hasOwnProperty.call(codecs, t);
}

type DeepPartial<T> = T extends Buffer | Date | string | number | boolean | undefined ? T
  : T extends Array<infer U> ? Array<DeepPartial<U>>
  : T extends Map<infer K, infer V> ? Map<K, DeepPartial<V>>
  : T extends object ? { [P in keyof T]?: DeepPartial<T[P]> }
  : T;

/** Builds an event, filling the payload's defaults (nested messages included). */
export function ev<K extends EventType>(type: K, data: DeepPartial<Payload<K>> = {} as DeepPartial<Payload<K>>): EventOf<K> {
  const codec = codecs[type] as unknown as Codec<Payload<K>>;
  return { type, data: codec.fromPartial(data as never) } as unknown as EventOf<K>;
}

export function encode(e: DomainEvent): EncodedEvent {
  const codec = codecs[e.type] as unknown as Codec<unknown>;
  return { type: e.type, data: codec.toJSON(e.data) };
}

/**
 * Reads a stored payload of an older event type as the type that replaced it: a pure
 * function of the JSON payload (no clock, no lookups), applied before any fold sees it.
 */
export interface Upcaster {
  /** The type it produces: a known type, or one another upcaster takes further. */
  to: string;
  upcast(data: unknown): unknown;
}

/** Upcasters by the stored type they read. */
export type Upcasters = Readonly<Record<string, Upcaster>>;

/**
 * The event types this version reads under a newer type. None so far: every type is at
 * its first version. Evolving one (docs/events.md): `x.v1` → `x.v2` here, with `x.v2` in
 * EventPayloads and x.v1 out of it.
 */
export const UPCASTERS: Upcasters = {};

/** More steps than any chain of versions: a cycle among upcasters fails loudly instead of looping. */
const MAX_UPCASTS = 16;

/** A decode that brings each stored event up to the type this version knows, through `upcasters`. */
export function decoder(upcasters: Upcasters): (e: Pick<StoredEvent, "type" | "data">) => DomainEvent | undefined {
  return (e) => {
    let { type, data } = e;
    for (let steps = 0; !isEventType(type); steps++) {
      const upcaster = Object.prototype.hasOwnProperty.call(upcasters, type) ? upcasters[type] : undefined;
      if (!upcaster) return undefined;
      if (steps >= MAX_UPCASTS) throw new Error(`the upcasters of ${e.type} go round in a cycle (through ${type})`);
      data = upcaster.upcast(data);
      type = upcaster.to;
    }
    const codec = codecs[type] as unknown as Codec<unknown>;
    return { type, data: codec.fromJSON(data) } as DomainEvent;
  };
}

/**
 * Decodes a recorded event, upcast to its current type; undefined for a type this version
 * does not know (a newer version's event, during a rolling update: skipped by every fold).
 */
export const decode = decoder(UPCASTERS);

export const Aggregates = {
  plugin: "plugin",
  sandbox: "sandbox",
  /** A route group: a routing context of the sandboxes whose labels match. */
  routegroup: "routegroup",
  workflow: "workflow",
  steprun: "steprun",
  /** The runner's record of a sandbox's forks on its cluster, by routing key. */
  forks: "forks",
  /** A sandbox incarnation's output values, by routing key: recorded once they are dropped. */
  outputs: "outputs",
  deadletter: "deadletter",
  /** A workstation's session with the tunnel service, by session id: the audit log of local workloads. */
  tunnel: "tunnel",
  /** Whether a sandbox's local workloads are served by a workstation now, by routing key. */
  locals: "locals",
  /** A job runner group, by name: pods kept ready to run jobs. */
  jobrunnergroup: "jobrunnergroup",
  /** The runner's report of a job runner group's ready pods, by group name. */
  jobpods: "jobpods",
  /** A job, by its generated name. */
  job: "job",
} as const;

export type Phase = "create" | "delete";

/** `<routingKey>.<resource>.<phase>`: unique per sandbox incarnation (the routing key is minted at creation). */
export const workflowId = (routingKey: string, resource: string, phase: Phase) => `${routingKey}.${resource}.${phase}`;

/** `<workflowId>.<step>.<attempt>`: deterministic, so a redelivered dispatch never starts a second run. */
export const runId = (workflow: string, step: string, attempt: number) => `${workflow}.${step}.${attempt}`;

export function parseRunId(id: string): { workflowId: string; routingKey: string; resource: string; phase: Phase; step: string; attempt: number } | undefined {
  const t = id.split(".");
  if (t.length !== 5) return undefined;
  const [routingKey, resource, phase, step, attempt] = t as [string, string, string, string, string];
  if (phase !== "create" && phase !== "delete") return undefined;
  const n = Number(attempt);
  if (!Number.isInteger(n) || n < 1) return undefined;
  return { workflowId: `${routingKey}.${resource}.${phase}`, routingKey, resource, phase, step, attempt: n };
}

/** The wire form of a dispatch on the work queue: canonical proto3 JSON. The scheduler writes it, runners read it. */
export const dispatchCodec = {
  encode: (d: pb.StepDispatch) => JSON.stringify(pb.StepDispatch.toJSON(d)),
  decode: (s: string) => pb.StepDispatch.fromJSON(JSON.parse(s)),
};

/** Output values are secrets: tools print events with values replaced by their sizes. */
export function redact<E extends Pick<StoredEvent, "type" | "data">>(e: E): E {
  if (e.type !== "ephemera.steprun.succeeded.v1") return e;
  const data = e.data as { outputs?: Array<{ name: string; value?: string; size?: number; sha256?: string }> };
  return {
    ...e,
    data: {
      ...data,
      outputs: (data.outputs ?? []).map((o) => ({ name: o.name, size: o.sha256 ? Number(o.size ?? 0) : Buffer.from(o.value ?? "", "base64").length })),
    },
  };
}


/** A Projection-compatible evolve over recorded events for one of the folds above. */
export function folding<S>(fold: (state: S, event: DomainEvent, time: string) => S) {
  return (state: S, recorded: StoredEvent): S => {
    const event = decode(recorded);
    return event ? fold(state, event, recorded.time) : state;
  };
}
export * from "./values.js";
