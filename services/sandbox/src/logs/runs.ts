// The runs a log request reads and whether one has ended, from the projections, or from the
// store for a deleted sandbox (its logs are read until their retention, after it left memory).
import { parseRunId, workflowId } from "@ephemera/events";
import type { EventStore } from "@ephemera/eventstore";
import { routingKeyOf, type SandboxProjections } from "../core/projections.js";
import type { WorkflowProgress } from "../workflow/progress.js";
import { runEnded, selectRuns, type LogFilter, type LogSelection } from "./select.js";

/**
 * The runs whose logs a request reads, in plan order, create phase first (each step's
 * latest attempt, or attempt `filter.attempt`), and whether more may still start.
 */
export async function logRuns(
  store: EventStore, projections: SandboxProjections, sandbox: string, resource: string, filter: LogFilter,
): Promise<LogSelection> {
  const { sandboxes, workflows, plugins } = projections;
  const held = sandboxes.get(sandbox)?.state;
  const state = held ?? (await sandboxes.read(store, sandbox)).state;
  const record = state.status !== "none" ? state : undefined;
  const r = record?.resources.find((x) => x.name === resource);
  const read = new Map<string, WorkflowProgress | undefined>();
  if (record && !held) {
    for (const phase of ["create", "delete"] as const) {
      const wf = await workflows.read(store, workflowId(record.routingKey, resource, phase));
      read.set(phase, wf.revision > 0 ? wf.state : undefined);
    }
  }
  return selectRuns(sandbox, resource, filter, {
    sandbox: state,
    workflow: (phase) => (!record
      ? undefined
      : held ? workflows.get(workflowId(record.routingKey, resource, phase))?.state : read.get(phase)),
    pluginSteps: (phase) => {
      const spec = r && plugins.get(r.plugin)?.state.versions.get(r.version)?.spec;
      return spec?.[phase].map((s) => s.name);
    },
  });
}

/** Whether a run is over, as its workflow records it. */
export function logRunEnded(projections: SandboxProjections, runId: string): boolean {
  const run = parseRunId(runId);
  if (!run) return false;
  const wf = projections.workflows.get(run.workflowId)?.state;
  // A workflow no longer held whose sandbox is gone was retired, and only ended ones are.
  if (!wf && !projections.isLive(routingKeyOf(run.workflowId))) return true;
  return runEnded(wf, runId);
}
