// The sandbox service's fold of the workflow events it shows (the scheduler owns the
// workflow aggregate and its decision state): steps, attempts, outcomes.
import type * as pb from "@ephemera/proto";
import type { DomainEvent } from "@ephemera/events";

export type StepStatus = "pending" | "queued" | "running" | "retrying" | "succeeded" | "failed" | "cancelled";

export interface AttemptState {
  attempt: number;
  runId: string;
  status: "queued" | "running" | "succeeded" | "failed" | "cancelled";
  failure?: pb.StepFailure;
  /** Event times (RFC 3339) of its dispatch, its start and its end. */
  queuedAt?: string;
  startedAt?: string;
  endedAt?: string;
}

export interface StepState {
  name: string;
  dependsOn: string[];
  status: StepStatus;
  attempt: number;
  runId?: string;
  outputs: pb.OutputRef[];
  attempts: AttemptState[];
  /** Set while no runner has taken the current run for a while. */
  unclaimed?: { cluster: string; since: string };
  retryAt?: string;
}

export type WorkflowStatus = "none" | "running" | "cancelling" | "succeeded" | "failed" | "cancelled";

export interface WorkflowState {
  status: WorkflowStatus;
  started?: pb.WorkflowStarted;
  steps: StepState[];
  /** The failure that ended the workflow. */
  failure?: pb.StepFailure;
  /** How many times it was retried after failing. */
  retried: number;
}

export const initialWorkflow = (): WorkflowState => ({ status: "none", steps: [], retried: 0 });

export const isTerminal = (s: WorkflowStatus) => s === "succeeded" || s === "failed" || s === "cancelled";

const live = (s: StepState) => s.status === "queued" || s.status === "running";

export function evolveWorkflow(state: WorkflowState, event: DomainEvent, time = ""): WorkflowState {
  const step = (name: string, f: (s: StepState) => StepState) => state.steps.map((s) => (s.name === name ? f(s) : s));
  const attempt = (s: StepState, runId: string, f: (a: AttemptState) => AttemptState) =>
    s.attempts.map((a) => (a.runId === runId ? f(a) : a));
  switch (event.type) {
    case "ephemera.workflow.started.v1":
      return {
        status: "running",
        started: event.data,
        steps: event.data.steps.map((s) => ({ name: s.name, dependsOn: s.dependsOn, status: "pending", attempt: 0, outputs: [], attempts: [] })),
        retried: 0,
      };
    case "ephemera.workflow.step_dispatched.v1": {
      const { step: name, runId, attempt: n } = event.data;
      const known = state.steps.some((s) => s.name === name);
      const steps = known ? state.steps : [...state.steps, { name, dependsOn: [], status: "pending" as const, attempt: 0, outputs: [], attempts: [] }];
      return {
        ...state,
        steps: steps.map((s) => (s.name === name
          ? { ...s, status: "queued", attempt: n, runId, unclaimed: undefined, retryAt: undefined, attempts: [...s.attempts, { attempt: n, runId, status: "queued", queuedAt: time }] }
          : s)),
      };
    }
    case "ephemera.workflow.step_started.v1":
      return { ...state, steps: step(event.data.step, (s) => ({
        ...s, status: s.runId === event.data.runId ? "running" : s.status, unclaimed: undefined,
        attempts: attempt(s, event.data.runId, (a) => ({ ...a, status: "running", startedAt: time })),
      })) };
    case "ephemera.workflow.step_unclaimed.v1":
      return { ...state, steps: step(event.data.step, (s) => ({ ...s, unclaimed: { cluster: event.data.cluster, since: time } })) };
    case "ephemera.workflow.step_retry_scheduled.v1":
      return { ...state, steps: step(event.data.step, (s) => ({
        ...s, status: "retrying", retryAt: event.data.retryAt, unclaimed: undefined,
        attempts: attempt(s, event.data.runId, (a) => ({ ...a, status: "failed", failure: event.data.failure, endedAt: time })),
      })) };
    case "ephemera.workflow.step_succeeded.v1":
      return { ...state, steps: step(event.data.step, (s) => ({
        ...s, status: "succeeded", outputs: event.data.outputs, attempts: attempt(s, event.data.runId, (a) => ({ ...a, status: "succeeded", endedAt: time })),
      })) };
    case "ephemera.workflow.step_failed.v1":
      return {
        ...state,
        steps: step(event.data.step, (s) => ({
          ...s, status: "failed", attempts: attempt(s, event.data.runId, (a) => ({ ...a, status: "failed", failure: event.data.failure, endedAt: a.endedAt ?? time })),
        })),
        failure: state.failure ?? event.data.failure,
      };
    case "ephemera.workflow.run_stop_requested.v1": {
      const stopped = new Set(event.data.runIds);
      return { ...state, steps: state.steps.map((s) => (s.status === "queued" && stopped.has(s.runId!) ? {
        ...s, status: "cancelled", attempts: s.attempts.map((a) => (a.status === "queued" && stopped.has(a.runId) ? { ...a, status: "cancelled", endedAt: time } : a)),
      } : s)) };
    }
    case "ephemera.workflow.cancel_requested.v1":
      return {
        ...state, status: "cancelling",
        steps: state.steps.map((s) => (["running", "succeeded", "failed"].includes(s.status) ? s : {
          ...s, status: "cancelled", attempts: s.attempts.map((a) => (a.status === "queued" ? { ...a, status: "cancelled", endedAt: time } : a)),
        })),
      };
    case "ephemera.workflow.retried.v1": {
      const again = new Set(event.data.steps);
      const { failure: _f, ...rest } = state;
      return {
        ...rest, status: "running", retried: state.retried + 1,
        steps: state.steps.map((s) => (again.has(s.name) ? { ...s, status: "pending" } : s)),
      };
    }
    case "ephemera.workflow.succeeded.v1":
      return { ...state, status: "succeeded" };
    case "ephemera.workflow.failed.v1":
      return {
        ...state, status: "failed", failure: event.data.failure ?? state.failure,
        steps: state.steps.map((s) => (s.status === "succeeded" || s.status === "failed" ? s : {
          ...s, status: "cancelled", attempts: s.attempts.map((a) => (a.status === "queued" || a.status === "running" ? { ...a, status: "cancelled", endedAt: time } : a)),
        })),
      };
    case "ephemera.workflow.cancelled.v1":
      return { ...state, status: "cancelled", steps: state.steps.map((s) => (live(s) ? { ...s, status: "cancelled" } : s)) };
    default:
      return state;
  }
}
