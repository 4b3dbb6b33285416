// What the sandbox service shows of a workflow: the scheduler's own state of it (folded
// with the scheduler's evolve, the one workflow state machine), plus what only a reader
// wants: each attempt with its times and failure, since when a run waits for a runner.
// Every status here is read from the scheduler's state, never decided again.
import type * as pb from "@ephemera/proto";
import type { DomainEvent } from "@ephemera/events";
import {
  evolve, initialWorkflow, type StepState, type StepStatus, type WorkflowState,
} from "@ephemera/scheduler/decider";

export type { StepStatus };
export type AttemptStatus = "queued" | "running" | "succeeded" | "failed" | "cancelled";

export interface AttemptProgress {
  attempt: number;
  runId: string;
  status: AttemptStatus;
  failure?: pb.StepFailure;
  /** Event times (RFC 3339) of its dispatch, its start and its end. */
  queuedAt?: string;
  startedAt?: string;
  endedAt?: string;
}

export interface StepProgress {
  name: string;
  dependsOn: string[];
  status: StepStatus;
  attempt: number;
  runId?: string;
  outputs: pb.OutputRef[];
  attempts: AttemptProgress[];
  /** Set while the current run is queued and was reported as taken by no runner. */
  unclaimed?: { cluster: string; since: string };
  /** When its next attempt is due, as the retry's event wrote it; kept until that attempt is dispatched. */
  retryAt?: string;
}

export interface WorkflowProgress {
  status: WorkflowState["status"];
  started?: pb.WorkflowStarted;
  steps: StepProgress[];
  /** The failure that ended (or is ending) the workflow. */
  failure?: pb.StepFailure;
  /** How many times it was retried after failing. */
  retried: number;
  /** The scheduler's state of the workflow, which every status above is read from. */
  workflow: WorkflowState;
}

export const initialProgress = (): WorkflowProgress => ({ status: "none", steps: [], retried: 0, workflow: initialWorkflow() });

/** The status of a step's current attempt; a step made pending by a retry keeps its last attempt as it ended. */
const ATTEMPT: Record<StepStatus, AttemptStatus | undefined> = {
  pending: undefined, queued: "queued", running: "running", retrying: "failed",
  succeeded: "succeeded", failed: "failed", cancelled: "cancelled",
};
const ENDED = new Set<AttemptStatus>(["succeeded", "failed", "cancelled"]);

/** `time` is the event's envelope time (RFC 3339). */
export function evolveProgress(progress: WorkflowProgress, event: DomainEvent, time = ""): WorkflowProgress {
  const workflow = evolve(progress.workflow, event, Date.parse(time));
  if (workflow === progress.workflow) return progress;
  if (workflow.status === "none") return { ...initialProgress(), workflow };
  // A new workflow (started) begins with no attempts; otherwise each step continues its own.
  const before = new Map(event.type === "ephemera.workflow.started.v1" ? [] : progress.steps.map((s) => [s.name, s]));
  return {
    status: workflow.status,
    started: workflow.started,
    steps: workflow.steps.map((s) => stepProgress(s, before.get(s.name), event, time)),
    failure: workflow.failure,
    retried: workflow.retried,
    workflow,
  };
}

function stepProgress(step: StepState, before: StepProgress | undefined, event: DomainEvent, time: string): StepProgress {
  let attempts = before?.attempts ?? [];
  if (step.runId && !attempts.some((a) => a.runId === step.runId)) {
    attempts = [...attempts, { attempt: step.attempt, runId: step.runId, status: "queued", queuedAt: time }];
  }
  attempts = attempts.map((a) => (a.runId === step.runId ? current(a, step, event, time) : a));
  const unclaimed = !step.unclaimed || step.status !== "queued" ? undefined
    : event.type === "ephemera.workflow.step_unclaimed.v1" && event.data.step === step.name ? { cluster: event.data.cluster, since: time }
      : before?.unclaimed;
  const retryAt = step.retryAt === undefined ? undefined
    : event.type === "ephemera.workflow.step_retry_scheduled.v1" && event.data.step === step.name ? event.data.retryAt
      : before?.retryAt;
  return {
    name: step.name, dependsOn: step.dependsOn, status: step.status, attempt: step.attempt, runId: step.runId,
    outputs: step.outputs, attempts, unclaimed, retryAt,
  };
}

/**
 * The step's current attempt after the event: it follows the step's status, timed by the
 * event that moved it, until it ends; what the step does after that (wait to retry, be
 * cancelled with its failing workflow, be retried) is no longer this attempt's.
 */
function current(a: AttemptProgress, step: StepState, event: DomainEvent, time: string): AttemptProgress {
  const next = ATTEMPT[step.status];
  const status = next === undefined || (ENDED.has(a.status) && ENDED.has(next)) ? a.status : next;
  const failure = (event.type === "ephemera.workflow.step_retry_scheduled.v1" || event.type === "ephemera.workflow.step_failed.v1")
    && event.data.runId === a.runId ? event.data.failure : undefined;
  if (status === a.status && !failure) return a;
  return {
    ...a, status,
    ...(failure ? { failure } : {}),
    ...(status === "running" && a.status !== "running" ? { startedAt: (event.type === "ephemera.workflow.step_started.v1" && event.data.startedAt) || time } : {}),
    ...(ENDED.has(status) && !a.endedAt ? { endedAt: time } : {}),
  };
}
