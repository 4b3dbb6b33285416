// The workflow aggregate's state (one per resource and phase: a DAG of steps) and its
// evolve. Owned by the scheduler; other services fold the published events themselves.
import type * as pb from "@ephemera/proto";
import type { DomainEvent } from "@ephemera/events";

export type StepStatus = "pending" | "queued" | "running" | "retrying" | "succeeded" | "failed" | "cancelled";

export interface StepState {
  name: string;
  dependsOn: string[];
  timeoutMs: number;
  retries: number;
  status: StepStatus;
  /** The current (or last) attempt; 0 before the first dispatch. */
  attempt: number;
  runId?: string;
  /** When the step entered its status (ms since epoch): the origin of its timers. */
  since: number;
  /** Failures of the script (count against `retries`) and of the infrastructure (against INFRA_RETRIES). */
  scriptFailures: number;
  infraFailures: number;
  retryAt?: number;
  /** The current run was reported unclaimed already. */
  unclaimed: boolean;
  outputs: pb.OutputRef[];
}

interface Started {
  started: pb.WorkflowStarted;
  steps: StepState[];
  /** How many times the workflow was retried after failing. */
  retried: number;
  /** When it started, or was last retried (the envelope's time, ms since epoch): where its duration is measured from. */
  startedAt: number;
  /** The first failure that ended (or is ending) the workflow. */
  failure?: pb.StepFailure;
}

export type StartedWorkflow = Started & { status: "running" | "cancelling" | "succeeded" | "failed" | "cancelled" };
export type ActiveWorkflow = Started & { status: "running" | "cancelling" };
export type WorkflowState = { status: "none" } | StartedWorkflow;

export const initialWorkflow = (): WorkflowState => ({ status: "none" });

export const isTerminal = (s: WorkflowState["status"]) => s === "succeeded" || s === "failed" || s === "cancelled";
export const isActive = (s: WorkflowState): s is ActiveWorkflow => s.status === "running" || s.status === "cancelling";
/** A run may be live somewhere: queued for a runner or running on one. */
export const isLive = (s: StepState) => s.status === "queued" || s.status === "running";

export function plannedStep(p: pb.PlannedStep, since: number): StepState {
  return {
    name: p.name, dependsOn: p.dependsOn, timeoutMs: p.timeoutMs, retries: p.retries, status: "pending", attempt: 0, since,
    scriptFailures: 0, infraFailures: 0, unclaimed: false, outputs: [],
  };
}

/** `time` is the event's envelope time: the clock of the decision that appended it. */
export function evolve(state: WorkflowState, event: DomainEvent, time: number): WorkflowState {
  if (event.type === "ephemera.workflow.started.v1") {
    return { status: "running", started: event.data, steps: event.data.steps.map((p) => plannedStep(p, time)), retried: 0, startedAt: time };
  }
  if (state.status === "none") return state;
  const step = (name: string, f: (s: StepState) => StepState): WorkflowState =>
    ({ ...state, steps: state.steps.map((s) => (s.name === name ? f(s) : s)) });
  switch (event.type) {
    case "ephemera.workflow.step_dispatched.v1":
      return step(event.data.step, (s) => ({
        ...s, status: "queued", attempt: event.data.attempt, runId: event.data.runId, since: time, unclaimed: false, retryAt: undefined,
      }));
    case "ephemera.workflow.step_started.v1":
      // Recorded with the run's result (started_at): the run began then, not at the event's time.
      return step(event.data.step, (s) => (s.runId === event.data.runId ? { ...s, status: "running", since: event.data.startedAt ? Date.parse(event.data.startedAt) : time } : s));
    case "ephemera.workflow.step_unclaimed.v1":
      return step(event.data.step, (s) => ({ ...s, unclaimed: true }));
    case "ephemera.workflow.step_retry_scheduled.v1": {
      const infra = event.data.infrastructure;
      return step(event.data.step, (s) => ({
        ...s, status: "retrying", since: time, retryAt: Date.parse(event.data.retryAt),
        scriptFailures: s.scriptFailures + (infra ? 0 : 1), infraFailures: s.infraFailures + (infra ? 1 : 0),
      }));
    }
    case "ephemera.workflow.step_succeeded.v1":
      return step(event.data.step, (s) => ({ ...s, status: "succeeded", since: time, outputs: event.data.outputs }));
    case "ephemera.workflow.step_failed.v1": {
      const next = step(event.data.step, (s) => ({ ...s, status: "failed", since: time }));
      return next.status === "none" ? next : { ...next, failure: next.failure ?? event.data.failure };
    }
    case "ephemera.workflow.run_stop_requested.v1": {
      // A queued run told to stop never starts (its runner drops it); a running one reports back.
      const stopped = new Set(event.data.runIds);
      return { ...state, steps: state.steps.map((s) => (s.status === "queued" && stopped.has(s.runId!) ? { ...s, status: "cancelled", since: time } : s)) };
    }
    case "ephemera.workflow.cancel_requested.v1":
      return {
        ...state, status: "cancelling",
        // What is not running is cancelled at once (a runner drops a queued run of a cancelled
        // workflow); running steps end with their runner's result.
        steps: state.steps.map((s) => (["running", "succeeded", "failed"].includes(s.status) ? s : { ...s, status: "cancelled", since: time })),
      };
    case "ephemera.workflow.retried.v1": {
      const again = new Set(event.data.steps);
      const { failure: _f, ...rest } = state;
      return {
        ...rest, status: "running", retried: state.retried + 1, startedAt: time,
        steps: state.steps.map((s) => (again.has(s.name) ? { ...s, status: "pending", since: time, scriptFailures: 0, infraFailures: 0 } : s)),
      };
    }
    case "ephemera.workflow.succeeded.v1":
      return { ...state, status: "succeeded" };
    case "ephemera.workflow.failed.v1":
      return {
        ...state, status: "failed", failure: event.data.failure ?? state.failure,
        // Steps that never got to run (queued, pending, waiting to retry) will not.
        steps: state.steps.map((s) => (s.status === "succeeded" || s.status === "failed" ? s : { ...s, status: "cancelled", since: time })),
      };
    case "ephemera.workflow.cancelled.v1":
      return { ...state, status: "cancelled", steps: state.steps.map((s) => (isLive(s) ? { ...s, status: "cancelled", since: time } : s)) };
    default:
      return state;
  }
}
