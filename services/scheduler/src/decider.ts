// The workflow aggregate without the service around it: its state, evolve and decide, pure
// and free of I/O. Every service that shows a workflow folds its events with this evolve, so
// one state machine says what a step's and a workflow's status is.
export { decide, nextDue, commandKey, workflowDecider, type WorkflowCommand } from "./workflow/decide.js";
export {
  evolve, initialWorkflow, isActive, isLive, isTerminal,
  type ActiveWorkflow, type StartedWorkflow, type StepState, type StepStatus, type WorkflowState,
} from "./workflow/state.js";
export { DEFAULT_POLICY, INFRA_REASONS, type Policy } from "./workflow/policy.js";
