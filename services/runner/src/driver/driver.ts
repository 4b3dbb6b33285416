// The port between the runner and what actually runs a step: a local process tree
// (process driver) or, later, a pod (Kubernetes driver). The driver runs the agents'
// logic and the script; the runner owns the StepRun aggregate and the work item.
import type * as pb from "@ephemera/proto";
import type { StepReport } from "@ephemera/io-agent";

export interface RunRequest {
  dispatch: pb.StepDispatch;
  /** Capability token for the IO context; empty when the driver said it needs none for this dispatch (needsToken). */
  token: string;
  /** The default environment of the script (SIGNADOT_*, EPHEMERA_*). */
  env: Record<string, string>;
  /** Receives the step's log as it is produced. */
  onLog(chunk: Buffer): void;
  /** So many bytes of the log are stored already (a step a lost runner started): not passed on again. */
  skipLogBytes?: number;
}

export interface RunningStep {
  /** Settles once the step has ended and its processes (or pod) are gone. Never rejects. */
  readonly result: Promise<StepReport>;
  /** Asks the step to stop: SIGTERM (or pod deletion), then a forced kill after the grace period. */
  stop(graceMs: number): void;
  /**
   * Settles once the step's own program has started, its inputs fetched and staged (or its
   * container started): the step's timeout counts from then (a driver without it: from the
   * run's start). Settles at the latest with `result`.
   */
  readonly began?: Promise<void>;
  /**
   * Settles once the step's own program has exited, before the driver stores its outputs: the
   * step's timeout stops counting then (a driver without it: once `result` settles).
   */
  readonly exited?: Promise<void>;
  /**
   * Settles with the step's report as soon as it is known, before the driver's own work after
   * it (caching the outputs at the IO context): the runner keeps it with the run's claim then.
   * A driver without it: `result`.
   */
  readonly ended?: Promise<StepReport>;
}

export interface StepDriver {
  readonly name: string;
  run(request: RunRequest): RunningStep;
  /** The report of a run that ended while nobody recorded it (its runner died), if one was kept. */
  recover?(runId: string): Promise<StepReport | undefined>;
  /**
   * Whether the run is still alive where it runs (its pod exists): a runner that finds a run
   * started by a lost one follows it instead of recording it lost.
   */
  attached?(dispatch: pb.StepDispatch): Promise<boolean>;
  /** Forgets what is kept of a run once its result is recorded (the Kubernetes driver deletes its pod). */
  cleanup?(runId: string): Promise<void>;
  /** Lets go of what the driver holds for every step (its IO-context connection). */
  close?(): void;
  /**
   * Whether running this dispatch calls the IO context, so needs the run's capability token
   * (an HMAC signature the runner makes per step). A driver without it: always.
   */
  needsToken?(dispatch: pb.StepDispatch): boolean;
}

/** The environment every step gets, as Signadot's runner sets it plus ephemera's names. */
export function defaultStepEnv(d: pb.StepDispatch): Record<string, string> {
  return {
    SIGNADOT_SANDBOX_NAME: d.sandbox,
    SIGNADOT_SANDBOX_ROUTING_KEY: d.routingKey,
    SIGNADOT_RESOURCE_NAME: d.resource,
    SIGNADOT_SANDBOX_ID: d.routingKey,
    EPHEMERA_SANDBOX_NAME: d.sandbox,
    EPHEMERA_ROUTING_KEY: d.routingKey,
    EPHEMERA_RESOURCE_NAME: d.resource,
    EPHEMERA_STEP_NAME: d.step,
    EPHEMERA_PHASE: d.phase,
    EPHEMERA_RUN_ID: d.runId,
  };
}
