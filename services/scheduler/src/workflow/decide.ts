// The workflow decider: start a plan, record step results, cancel. Pure: the caller
// passes everything in and appends what comes out.
import type * as pb from "@ephemera/proto";
import { ev, runId, type DomainEvent } from "@ephemera/events";
import { ConflictError } from "@ephemera/kit";
import { isTerminal, type WorkflowState } from "@ephemera/events";

export type WorkflowCommand =
  | { kind: "start"; started: pb.WorkflowStarted }
  | { kind: "record-success"; step: string; runId: string; outputs: pb.OutputRef[] }
  | { kind: "record-failure"; step: string; runId: string; failure: pb.StepFailure }
  | { kind: "cancel"; reason: string };

export function decideWorkflow(command: WorkflowCommand, state: WorkflowState): DomainEvent[] {
  switch (command.kind) {
    case "start": {
      if (state.status !== "none") return [];
      const started = ev("ephemera.workflow.started.v1", command.started);
      const after = { status: "running" as const, started: started.data, steps: started.data.steps.map((s) => ({
        name: s.name, dependsOn: s.dependsOn, status: "pending" as const, attempt: 0, outputs: [],
      })) };
      return [started, ...advance(after)];
    }
    case "record-success":
    case "record-failure": {
      const step = state.steps.find((s) => s.name === command.step);
      if (!step) throw new ConflictError(`workflow ${state.started?.workflowId} has no step ${command.step}`);
      // A result for a run that is not the current one (a duplicate, an old attempt) changes nothing.
      if (isTerminal(state.status) || step.status !== "running" || step.runId !== command.runId) return [];
      const recorded = command.kind === "record-success"
        ? ev("ephemera.workflow.step_succeeded.v1", { step: step.name, runId: command.runId, outputs: command.outputs })
        : ev("ephemera.workflow.step_failed.v1", { step: step.name, runId: command.runId, failure: command.failure });
      const after: WorkflowState = {
        ...state,
        steps: state.steps.map((s) => s.name === step.name
          ? { ...s, status: command.kind === "record-success" ? "succeeded" : "failed", outputs: command.kind === "record-success" ? command.outputs : [] }
          : s),
        failure: state.failure ?? (command.kind === "record-failure" ? command.failure : undefined),
      };
      return [recorded, ...advance(after)];
    }
    case "cancel": {
      if (state.status !== "running") return [];
      const requested = ev("ephemera.workflow.cancel_requested.v1", { reason: command.reason });
      return state.steps.some((s) => s.status === "running")
        ? [requested]
        : [requested, ev("ephemera.workflow.cancelled.v1", {})];
    }
  }
}

/** What follows from a state: dispatch ready steps, or end the workflow. */
function advance(state: WorkflowState): DomainEvent[] {
  const running = state.steps.some((s) => s.status === "running");
  if (state.status === "cancelling") return running ? [] : [ev("ephemera.workflow.cancelled.v1", {})];
  if (state.failure) return running ? [] : [ev("ephemera.workflow.failed.v1", { failure: state.failure })];
  if (state.steps.every((s) => s.status === "succeeded")) {
    return [ev("ephemera.workflow.succeeded.v1", {
      outputs: state.steps.flatMap((s) => s.outputs.map((o) => ({ key: `${s.name}.${o.key}`, size: o.size }))),
    })];
  }
  const done = new Set(state.steps.filter((s) => s.status === "succeeded").map((s) => s.name));
  const wf = state.started!.workflowId;
  return state.steps
    .filter((s) => s.status === "pending" && s.dependsOn.every((d) => done.has(d)))
    .map((s) => ev("ephemera.workflow.step_dispatched.v1", { step: s.name, runId: runId(wf, s.name, 1), attempt: 1 }));
}
