// The job aggregate's state and its evolve: queued → running (assigned to a pod) → ended
// (succeeded, failed or cancelled), with a cancel requested while running. The submit's
// stream position is kept: it is the job's place in its group's queue.
import type * as pb from "@ephemera/proto";
import { decode, type DomainEvent } from "@ephemera/events";
import type { RecordedEvent } from "@ephemera/eventstore";

export type JobPhase = "Queued" | "Running" | "Succeeded" | "Failed" | "Cancelled";

export interface JobRecord {
  status: "job";
  name: string;
  spec: pb.JobSpec;
  submitter: string;
  routingKey: string;
  phase: JobPhase;
  /** The stream position of the submit: the order of the queue. */
  queuedPosition: number;
  /** The stream position of the assignment: when its submitter was last served. */
  assignedPosition?: number;
  pod: string;
  exitCode?: number;
  reason: string;
  message: string;
  cancelRequestedBy?: string;
  cancelRequestedAt?: string;
  queuedAt: string;
  startedAt: string;
  endedAt: string;
  /** The artifacts stored, in order; a path stored again replaces its entry. */
  artifacts?: JobArtifact[];
}

export interface JobArtifact {
  path: string;
  size: number;
  sha256: string;
  meta: Record<string, string>;
}

export type JobState = { status: "none" } | JobRecord;

export const initialJob = (): JobState => ({ status: "none" });

export const isEnded = (job: JobRecord) => job.phase === "Succeeded" || job.phase === "Failed" || job.phase === "Cancelled";

/** The Projection's evolve: the fold below, with the commit's position. */
export function evolveJobRecorded(state: JobState, recorded: RecordedEvent): JobState {
  const event = decode(recorded);
  return event ? evolveJob(state, event, recorded.time, recorded.position) : state;
}

export function evolveJob(state: JobState, event: DomainEvent, time: string, position: number): JobState {
  if (event.type === "ephemera.job.submitted.v1") {
    return {
      status: "job", name: event.data.name, spec: event.data.spec!, submitter: event.data.submitter, routingKey: event.data.routingKey,
      phase: "Queued", queuedPosition: position, pod: "", reason: "", message: "", queuedAt: time, startedAt: "", endedAt: "",
    };
  }
  if (state.status === "none") return state;
  switch (event.type) {
    case "ephemera.job.assigned.v1":
      return { ...state, phase: "Running", pod: event.data.pod, assignedPosition: position, startedAt: time };
    case "ephemera.job.succeeded.v1":
      return { ...state, phase: "Succeeded", exitCode: event.data.exitCode, reason: event.data.reason, message: event.data.message, endedAt: time };
    case "ephemera.job.failed.v1": {
      // A timeout has an exit code when the pod killed the process; the server's own timeout (no report) has none.
      const exited = event.data.reason === "exited" || (event.data.reason === "timeout" && event.data.exitCode !== 0);
      return { ...state, phase: "Failed", ...(exited ? { exitCode: event.data.exitCode } : {}), reason: event.data.reason, message: event.data.message, endedAt: time };
    }
    case "ephemera.job.cancel_requested.v1":
      return { ...state, cancelRequestedBy: event.data.by, cancelRequestedAt: time };
    case "ephemera.job.artifact_stored.v1": {
      const { path, size, sha256, meta } = event.data;
      const artifact: JobArtifact = { path, size: Number(size), sha256, meta: { ...meta } };
      return { ...state, artifacts: [...(state.artifacts ?? []).filter((a) => a.path !== path), artifact] };
    }
    case "ephemera.job.cancelled.v1":
      return { ...state, phase: "Cancelled", reason: "cancelled", message: event.data.reason, endedAt: time };
    default:
      return state;
  }
}
