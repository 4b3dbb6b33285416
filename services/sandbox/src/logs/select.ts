// Which step runs a log request reads, whether each has ended, and whether more may still
// come (what `--follow` waits for): a reading of the sandbox's projected state, no I/O.
import { NotFoundError } from "@ephemera/kit";
import type { WorkflowProgress } from "../workflow/progress.js";
import type { SandboxState } from "../sandbox/state.js";

export type Phase = "create" | "delete";
const PHASES: readonly Phase[] = ["create", "delete"];

export interface LogFilter {
  step?: string;
  phase?: string;
  /** Only this attempt of each step (0 or absent: the latest). */
  attempt?: number;
}

export interface LogRun {
  step: string;
  phase: Phase;
  attempt: number;
  runId: string;
  /** The run is over, as its workflow records it: no more log will come. */
  ended: boolean;
}

export interface LogSelection {
  /** In plan order, create phase first. */
  runs: LogRun[];
  /** A run not in `runs` may still start (a step not yet dispatched, a retry, a workflow about to begin). */
  more: boolean;
}

export interface LogSources {
  sandbox: SandboxState | undefined;
  workflow(phase: Phase): WorkflowProgress | undefined;
  /** The step names of the resource's plugin version in a phase; undefined once the version is gone. */
  pluginSteps(phase: Phase): string[] | undefined;
}

const ENDED = new Set(["succeeded", "failed", "cancelled"]);
/** A step whose status is one of these may still get a new attempt. */
const UNFINISHED = new Set(["pending", "queued", "running", "retrying"]);

export function selectRuns(sandbox: string, resource: string, filter: LogFilter, from: LogSources): LogSelection {
  const state = from.sandbox;
  if (!state || state.status === "none") throw new NotFoundError(`sandbox ${sandbox} not found`);
  if (!state.resources.some((r) => r.name === resource)) throw new NotFoundError(`sandbox ${sandbox} has no resource ${resource}`);
  const phases = PHASES.filter((p) => !filter.phase || p === filter.phase);
  if (filter.step) checkStep(sandbox, resource, filter.step, filter.phase, phases, from);

  const runs: LogRun[] = [];
  let more = false;
  for (const phase of phases) {
    const wf = from.workflow(phase);
    for (const s of wf?.steps ?? []) {
      if (filter.step && s.name !== filter.step) continue;
      const a = filter.attempt ? s.attempts.find((x) => x.attempt === filter.attempt) : s.attempts.at(-1);
      if (a) runs.push({ step: s.name, phase, attempt: a.attempt, runId: a.runId, ended: ENDED.has(a.status) || ended(wf) });
    }
    if (filter.attempt) continue; // a named attempt exists or not: none is waited for
    const starting = (!wf || wf.status === "none") && (phase === "create" ? state.status === "active" : state.status === "deleting")
      && (!filter.step || (from.pluginSteps(phase)?.includes(filter.step) ?? true));
    const live = wf?.status === "running" || wf?.status === "cancelling";
    const step = filter.step ? wf?.steps.find((s) => s.name === filter.step) : undefined;
    more ||= starting || (live && (!filter.step || (step !== undefined && UNFINISHED.has(step.status))));
  }
  return { runs, more };
}

const ended = (wf: WorkflowProgress | undefined) => wf?.status === "succeeded" || wf?.status === "failed" || wf?.status === "cancelled";

/** NOT_FOUND for a step the resource's plugin does not have (when that can still be told). */
function checkStep(sandbox: string, resource: string, step: string, phase: string | undefined, phases: Phase[], from: LogSources): void {
  // Once the plugin version is gone, only the workflows that ran still name the steps.
  if (!phases.some((p) => from.pluginSteps(p) !== undefined || from.workflow(p))) return;
  const known = new Set(phases.flatMap((p) => [...(from.pluginSteps(p) ?? []), ...(from.workflow(p)?.steps.map((s) => s.name) ?? [])]));
  if (known.has(step)) return;
  throw new NotFoundError(`resource ${resource} of sandbox ${sandbox} has no step ${step}${phase ? ` in its ${phase} workflow` : ""} ` +
    `(${known.size ? `its steps: ${[...known].join(", ")}` : "it has none"})`);
}

/** Whether a run is over as its workflow records it (an unknown run is not). */
export function runEnded(wf: WorkflowProgress | undefined, runId: string): boolean {
  const attempt = wf?.steps.flatMap((s) => s.attempts).find((a) => a.runId === runId);
  return attempt !== undefined && (ENDED.has(attempt.status) || ended(wf));
}
