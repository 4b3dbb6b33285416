// The workflow decider: start a plan, record what runners report, fire due timers
// (retry, deadline, unclaimed), cancel, retry after failure. Pure: `now` and everything
// else come in with the command; the caller appends what comes out.
import type * as pb from "@ephemera/proto";
import { ev, runId, type DomainEvent } from "@ephemera/events";
import { ConflictError } from "@ephemera/kit";
import { DEFAULT_POLICY, INFRA_REASONS, retryDelayMs, type Policy } from "./policy.js";
import { evolve, initialWorkflow, isActive, isLive, type ActiveWorkflow, type StepState, type WorkflowState } from "./state.js";

export type WorkflowCommand =
  | { kind: "start"; started: pb.WorkflowStarted }
  | { kind: "run-started"; step: string; runId: string; runner: string }
  | { kind: "record-success"; step: string; runId: string; outputs: pb.OutputRef[]; started?: RunStart }
  | { kind: "record-failure"; step: string; runId: string; failure: pb.StepFailure; started?: RunStart }
  | { kind: "tick" }
  | { kind: "cancel"; reason: string }
  | { kind: "retry" };

/** A run's start, as its step run recorded it: carried by its result when the workflow has not recorded it yet. */
export interface RunStart {
  runner: string;
  /** RFC 3339. */
  at: string;
}

/** The workflow aggregate as one value: its initial state, evolve and decide. */
export const workflowDecider = {
  initialState: initialWorkflow,
  evolve,
  decide: (command: WorkflowCommand, state: WorkflowState, now: number) => decide(command, state, now),
};

/** The key of a command for deterministic commit ids: the same command on the same state dedupes. */
export function commandKey(c: WorkflowCommand): string {
  switch (c.kind) {
    case "run-started": case "record-success": case "record-failure": return `${c.kind}:${c.runId}`;
    default: return c.kind;
  }
}

export function decide(command: WorkflowCommand, state: WorkflowState, now: number, policy: Policy = DEFAULT_POLICY): DomainEvent[] {
  if (command.kind === "start") {
    if (state.status !== "none") return [];
    const started = ev("ephemera.workflow.started.v1", command.started);
    const after = evolve(state, started, now);
    if (command.started.failure) return [started, ev("ephemera.workflow.failed.v1", { failure: command.started.failure })];
    return [started, ...advance(after, now)];
  }
  if (state.status === "none") return [];
  switch (command.kind) {
    case "run-started": {
      const step = find(state, command.step);
      if (step.runId !== command.runId || step.status !== "queued") return [];
      return [ev("ephemera.workflow.step_started.v1", { step: step.name, runId: command.runId, runner: command.runner })];
    }
    case "record-success": {
      const step = find(state, command.step);
      // A result for a run that is not the current live one (a duplicate, an old attempt) changes nothing.
      if (!isActive(state) || step.runId !== command.runId || !isLive(step)) return [];
      const start = startOf(step, command);
      const running = start.length ? evolve(state, start[0]!, now) : state;
      const e = ev("ephemera.workflow.step_succeeded.v1", { step: step.name, runId: command.runId, outputs: command.outputs });
      return [...start, e, ...advance(evolve(running, e, now), now)];
    }
    case "record-failure": {
      const step = find(state, command.step);
      if (!isActive(state) || step.runId !== command.runId || !isLive(step)) return [];
      const start = startOf(step, command);
      if (!start.length) return failStep(state, step, command.failure, now, policy);
      const running = evolve(state, start[0]!, now) as ActiveWorkflow;
      return [...start, ...failStep(running, find(running, command.step), command.failure, now, policy)];
    }
    case "tick":
      return isActive(state) ? tick(state, now, policy) : [];
    case "cancel": {
      if (state.status !== "running") return [];
      const runIds = state.steps.filter(isLive).map((s) => s.runId!);
      const e = ev("ephemera.workflow.cancel_requested.v1", { reason: command.reason, runIds });
      return [e, ...advance(evolve(state, e, now), now)];
    }
    case "retry": {
      if (state.status !== "failed") return [];
      // A workflow that failed before it had steps (its plugin version was missing) fails again.
      if (state.started.failure) {
        return [ev("ephemera.workflow.retried.v1", { steps: [] }), ev("ephemera.workflow.failed.v1", { failure: state.started.failure })];
      }
      const steps = state.steps.filter((s) => s.status !== "succeeded").map((s) => s.name);
      const e = ev("ephemera.workflow.retried.v1", { steps });
      return [e, ...advance(evolve(state, e, now), now)];
    }
  }
}

/**
 * The start of a run whose result comes while its step is still queued (the scheduler puts
 * off recording starts): recorded in the result's commit, at the time the run started, so
 * the workflow's history still says when and where every run that started ran.
 */
function startOf(step: StepState, command: { runId: string; started?: RunStart }): DomainEvent[] {
  if (step.status !== "queued" || !command.started) return [];
  return [ev("ephemera.workflow.step_started.v1", { step: step.name, runId: command.runId, runner: command.started.runner, startedAt: command.started.at })];
}

/** When the next timer of this workflow is due (ms since epoch), if any. */
export function nextDue(state: WorkflowState, policy: Policy = DEFAULT_POLICY): number | undefined {
  if (!isActive(state)) return undefined;
  // A failing or cancelling workflow makes no more attempts: its retries are not due.
  const retrying = state.status === "running" && !state.failure;
  const due = state.steps.flatMap((s) => {
    if (s.status === "retrying" && s.retryAt !== undefined) return retrying ? [s.retryAt] : [];
    if (s.status === "queued" && !s.unclaimed) return [s.since + policy.unclaimedAfterMs];
    if (s.status === "running") return [s.since + s.timeoutMs + policy.deadlineGraceMs];
    return [];
  });
  return due.length ? Math.min(...due) : undefined;
}

function tick(state: ActiveWorkflow, now: number, policy: Policy): DomainEvent[] {
  const out: DomainEvent[] = [];
  let current: WorkflowState = state;
  for (const name of state.steps.map((s) => s.name)) {
    if (!isActive(current)) break;
    const s = find(current, name);
    let events: DomainEvent[] = [];
    if (s.status === "queued" && !s.unclaimed && now >= s.since + policy.unclaimedAfterMs) {
      events = [ev("ephemera.workflow.step_unclaimed.v1", {
        step: s.name, runId: s.runId!, cluster: current.started.cluster, waitedMs: now - s.since,
      })];
    } else if (s.status === "running" && now >= s.since + s.timeoutMs + policy.deadlineGraceMs) {
      // The runner should have stopped it at its deadline; it did not report: stop it and move on.
      const failure = { step: s.name, runId: s.runId!, reason: "DeadlineExceeded",
        message: `the step ran past its timeout of ${s.timeoutMs / 1000}s and its runner did not report`, logTail: "" };
      events = [ev("ephemera.workflow.run_stop_requested.v1", { runIds: [s.runId!], reason: "deadline exceeded" }), ...failStep(current, s, failure, now, policy)];
    } else if (s.status === "retrying" && s.retryAt !== undefined && now >= s.retryAt && current.status === "running" && !current.failure) {
      events = [dispatch(current, s, now)];
    }
    for (const e of events) current = evolve(current, e, now);
    out.push(...events);
  }
  if (out.length && isActive(current)) out.push(...advance(current, now));
  return out;
}

/** A failed attempt: another one later (policy permitting), or the step fails. */
function failStep(state: ActiveWorkflow, step: StepState, failure: pb.StepFailure, now: number, policy: Policy): DomainEvent[] {
  const infra = INFRA_REASONS.has(failure.reason);
  // A run declared lost may still be alive somewhere (a runner cut off, not dead): stop it.
  const stopLost = infra ? [ev("ephemera.workflow.run_stop_requested.v1", { runIds: [step.runId!], reason: "declared lost" })] : [];
  const canRetry = state.status === "running" && !state.failure && failure.reason !== "Cancelled" &&
    (infra ? step.infraFailures < policy.infraRetries : step.scriptFailures < step.retries);
  if (canRetry) {
    const failures = (infra ? step.infraFailures : step.scriptFailures) + 1;
    const e = ev("ephemera.workflow.step_retry_scheduled.v1", {
      step: step.name, runId: step.runId!, failure, nextAttempt: step.attempt + 1,
      retryAt: new Date(now + retryDelayMs(failures, step.runId!)).toISOString(), infrastructure: infra,
    });
    return [...stopLost, e];
  }
  const e = ev("ephemera.workflow.step_failed.v1", { step: step.name, runId: step.runId!, failure });
  return [...stopLost, e, ...advance(evolve(state, e, now), now)];
}

/** What follows from a state: dispatch ready steps, or end the workflow. */
function advance(state: WorkflowState, now: number): DomainEvent[] {
  if (!isActive(state)) return [];
  const live = state.steps.filter(isLive);
  const running = live.some((s) => s.status === "running");
  if (state.status === "cancelling") return running ? [] : [ev("ephemera.workflow.cancelled.v1", {})];
  if (state.failure) {
    // Queued runs of a failing workflow never start; running ones end with their result.
    const queued = live.filter((s) => s.status === "queued").map((s) => s.runId!);
    const stop = queued.length ? [ev("ephemera.workflow.run_stop_requested.v1", { runIds: queued, reason: "the workflow failed" })] : [];
    return running ? stop : [...stop, ev("ephemera.workflow.failed.v1", { failure: state.failure })];
  }
  if (state.steps.every((s) => s.status === "succeeded")) {
    return [ev("ephemera.workflow.succeeded.v1", {
      outputs: state.steps.flatMap((s) => s.outputs.map((o) => ({ key: `${s.name}.${o.key}`, size: o.size }))),
    })];
  }
  const done = new Set(state.steps.filter((s) => s.status === "succeeded").map((s) => s.name));
  return state.steps
    .filter((s) => s.status === "pending" && s.dependsOn.every((d) => done.has(d)))
    .map((s) => dispatch(state, s, now));
}

function dispatch(state: ActiveWorkflow, s: StepState, _now: number): DomainEvent {
  const attempt = s.attempt + 1;
  return ev("ephemera.workflow.step_dispatched.v1", { step: s.name, runId: runId(state.started.workflowId, s.name, attempt), attempt });
}

function find(state: Exclude<WorkflowState, { status: "none" }>, name: string): StepState {
  const step = state.steps.find((s) => s.name === name);
  if (!step) throw new ConflictError(`workflow ${state.started.workflowId} has no step ${name}`);
  return step;
}
