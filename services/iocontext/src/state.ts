// What the IO context knows from the event stream: the shared folds of plugins, workflows
// and sandboxes, and the two questions it asks of a workflow.
import {
  Aggregates, evolvePlugin, evolveSandbox, evolveWorkflow, folding, initialPlugin, initialSandbox, initialWorkflow,
  type PluginState, type SandboxState, type WorkflowState,
} from "@ephemera/events";
import { Projection } from "@ephemera/eventstore";

export type WorkflowView = WorkflowState;

/** Whether the workflow dispatched this run (the current attempt of one of its steps). */
export const dispatched = (w: WorkflowState, runId: string): boolean => w.steps.some((s) => s.runId === runId);

/** The run whose outputs count for a step: the one that succeeded. */
export const succeededRun = (w: WorkflowState | undefined, step: string): string | undefined =>
  w?.steps.find((s) => s.name === step && s.status === "succeeded")?.runId;

export function projections() {
  return {
    plugins: new Projection<PluginState>(Aggregates.plugin, initialPlugin, folding(evolvePlugin)),
    workflows: new Projection<WorkflowState>(Aggregates.workflow, initialWorkflow, folding(evolveWorkflow)),
    sandboxes: new Projection<SandboxState>(Aggregates.sandbox, initialSandbox, folding(evolveSandbox)),
  };
}
export type Projections = ReturnType<typeof projections>;
