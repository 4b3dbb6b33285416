// The workflow aggregate's state: one workflow per resource and phase, a DAG of steps.
import type * as pb from "@ephemera/proto";
import type { DomainEvent } from "./index.js";

export type StepStatus = "pending" | "running" | "succeeded" | "failed";

export interface StepState {
  name: string;
  dependsOn: string[];
  status: StepStatus;
  attempt: number;
  runId?: string;
  outputs: pb.OutputRef[];
}

export type WorkflowStatus = "none" | "running" | "cancelling" | "succeeded" | "failed" | "cancelled";

export interface WorkflowState {
  status: WorkflowStatus;
  started?: pb.WorkflowStarted;
  steps: StepState[];
  /** The first step failure; once set, nothing new is dispatched. */
  failure?: pb.StepFailure;
}

export const initialWorkflow = (): WorkflowState => ({ status: "none", steps: [] });

export const isTerminal = (s: WorkflowStatus) => s === "succeeded" || s === "failed" || s === "cancelled";

export function evolveWorkflow(state: WorkflowState, event: DomainEvent, _time?: string): WorkflowState {
  const step = (name: string, f: (s: StepState) => StepState) => state.steps.map((s) => (s.name === name ? f(s) : s));
  switch (event.type) {
    case "ephemera.workflow.started.v1":
      return {
        status: "running",
        started: event.data,
        steps: event.data.steps.map((s) => ({ name: s.name, dependsOn: s.dependsOn, status: "pending", attempt: 0, outputs: [] })),
      };
    case "ephemera.workflow.step_dispatched.v1": {
      const known = state.steps.some((s) => s.name === event.data.step);
      // A fold records what happened, even a dispatch of a step its plan did not list.
      const steps = known ? state.steps : [...state.steps, { name: event.data.step, dependsOn: [], status: "pending" as const, attempt: 0, outputs: [] }];
      return { ...state, steps: steps.map((s) => (s.name === event.data.step ? { ...s, status: "running", attempt: event.data.attempt, runId: event.data.runId } : s)) };
    }
    case "ephemera.workflow.step_succeeded.v1":
      return { ...state, steps: step(event.data.step, (s) => ({ ...s, status: "succeeded", outputs: event.data.outputs })) };
    case "ephemera.workflow.step_failed.v1":
      return {
        ...state,
        steps: step(event.data.step, (s) => ({ ...s, status: "failed" })),
        failure: state.failure ?? event.data.failure,
      };
    case "ephemera.workflow.succeeded.v1":
      return { ...state, status: "succeeded" };
    case "ephemera.workflow.failed.v1":
      return { ...state, status: "failed", failure: event.data.failure ?? state.failure };
    case "ephemera.workflow.cancel_requested.v1":
      return { ...state, status: "cancelling" };
    case "ephemera.workflow.cancelled.v1":
      return { ...state, status: "cancelled" };
    default:
      return state;
  }
}
