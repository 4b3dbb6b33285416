// The StepRun aggregate (one per step attempt, id = run id) as a pure decider: a run is
// started once, ends once, and a run found started-but-unfinished belongs to a lost runner.
import type * as pb from "@ephemera/proto";
import { ConflictError } from "@ephemera/kit";
import { ev, type DomainEvent, type EventOf } from "@ephemera/events";

export interface RunIdentity {
  runId: string;
  workflowId: string;
  step: string;
}

export type StepRunState =
  | { status: "new" }
  | { status: "started"; run: RunIdentity; runner: string }
  | { status: "succeeded"; run: RunIdentity; outputs: string[] }
  | { status: "failed"; run: RunIdentity; failure: pb.StepFailure };

export type StepRunCommand =
  /** `adopt`: the run's pod (or process) is alive and this runner follows it: nothing to record. */
  | { type: "start"; dispatch: pb.StepDispatch; driver: string; runner: string; adopt?: boolean }
  /** A dispatch no longer wanted (its workflow was cancelled or moved on): ended without running. */
  | { type: "drop"; dispatch: pb.StepDispatch; message: string }
  | { type: "succeed"; outputs: pb.OutputValue[]; durationMs: number }
  | { type: "fail"; failure: Omit<pb.StepFailure, "step" | "runId">; durationMs: number };

export type StepRunEvent =
  | EventOf<"ephemera.steprun.started.v1">
  | EventOf<"ephemera.steprun.succeeded.v1">
  | EventOf<"ephemera.steprun.failed.v1">;

export const initialStepRun = (): StepRunState => ({ status: "new" });

export const isFinished = (s: StepRunState) => s.status === "succeeded" || s.status === "failed";

export class StepRunNotStartedError extends ConflictError {
  constructor(command: StepRunCommand["type"]) {
    super(`cannot ${command} a step run that was never started`);
  }
}

/** The step-run aggregate as one value: its initial state, evolve and decide. */
export const stepRunDecider = {
  initialState: initialStepRun,
  evolve: (state: StepRunState, event: DomainEvent) => evolve(state, event),
  decide: (command: StepRunCommand, state: StepRunState, _now: number): DomainEvent[] => decide(command, state),
};

export function decide(command: StepRunCommand, state: StepRunState): StepRunEvent[] {
  switch (command.type) {
    case "start": {
      if (state.status === "new") {
        const d = command.dispatch;
        return [ev("ephemera.steprun.started.v1", {
          runId: d.runId, workflowId: d.workflowId, step: d.step, attempt: d.attempt, driver: command.driver, runner: command.runner,
        })];
      }
      // The same runner incarnation handling its own run again, or a runner following the
      // pod a lost one started: it resumes, nothing to record.
      if (state.status === "started" && (state.runner === command.runner || command.adopt)) return [];
      // Never a second process for one run id: a redelivered run nobody finished was lost with its runner.
      if (state.status === "started") {
        return [failed(state.run, {
          reason: "RunnerLost", message: `the runner that started this run (${state.runner || "unknown"}) stopped before recording its result`, logTail: "",
        }, 0)];
      }
      return [];
    }
    case "drop": {
      if (state.status !== "new") return [];
      const d = command.dispatch;
      return [failed({ runId: d.runId, workflowId: d.workflowId, step: d.step }, { reason: "Cancelled", message: command.message, logTail: "" }, 0)];
    }
    case "succeed":
    case "fail": {
      if (state.status === "new") throw new StepRunNotStartedError(command.type);
      if (state.status !== "started") return []; // the first recorded result stands
      if (command.type === "fail") return [failed(state.run, command.failure, command.durationMs)];
      return [ev("ephemera.steprun.succeeded.v1", { ...state.run, outputs: command.outputs, durationMs: command.durationMs })];
    }
    default:
      return unreachable(command);
  }
}

export function evolve(state: StepRunState, event: DomainEvent): StepRunState {
  switch (event.type) {
    case "ephemera.steprun.started.v1":
      return { status: "started", run: identity(event.data), runner: event.data.runner };
    case "ephemera.steprun.succeeded.v1":
      return { status: "succeeded", run: identity(event.data), outputs: event.data.outputs.map((o) => o.name) };
    case "ephemera.steprun.failed.v1":
      return { status: "failed", run: identity(event.data), failure: event.data.failure ?? failure(identity(event.data), {}) };
    default:
      return state;
  }
}

const identity = (d: RunIdentity): RunIdentity => ({ runId: d.runId, workflowId: d.workflowId, step: d.step });

const failure = (run: RunIdentity, f: Partial<pb.StepFailure>): pb.StepFailure => ({
  reason: "", message: "", logTail: "", ...f, step: run.step, runId: run.runId,
});

const failed = (run: RunIdentity, f: Omit<pb.StepFailure, "step" | "runId">, durationMs: number) =>
  ev("ephemera.steprun.failed.v1", { ...run, failure: failure(run, f), durationMs });

function unreachable(x: never): never {
  throw new Error(`unexpected command ${JSON.stringify(x)}`);
}
