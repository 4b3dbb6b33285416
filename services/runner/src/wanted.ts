// Whether a dispatched run is still wanted, read from its workflow's published events:
// the run must be its step's current attempt, the workflow neither cancelled nor ended
// (a retry after failing opens it again), and this run not told to stop.
import { Aggregates, decode } from "@ephemera/events";
import type { EventStore } from "@ephemera/eventstore";

/** Undefined when wanted; otherwise why not. */
export async function unwantedBecause(store: EventStore, workflowId: string, step: string, runId: string): Promise<string | undefined> {
  const { events } = await store.read(Aggregates.workflow, workflowId);
  let current: string | undefined;
  let ended = false;
  for (const r of events) {
    const e = decode(r);
    switch (e?.type) {
      case "ephemera.workflow.step_dispatched.v1":
        if (e.data.step === step) current = e.data.runId;
        break;
      case "ephemera.workflow.cancel_requested.v1":
        return `the workflow was cancelled (${e.data.reason || "no reason given"}) before the step started`;
      case "ephemera.workflow.run_stop_requested.v1":
        if (e.data.runIds.includes(runId)) return `the run was told to stop (${e.data.reason}) before it started`;
        break;
      case "ephemera.workflow.succeeded.v1":
      case "ephemera.workflow.failed.v1":
      case "ephemera.workflow.cancelled.v1":
        ended = true;
        break;
      case "ephemera.workflow.retried.v1":
        ended = false;
        break;
    }
  }
  if (ended) return "the workflow had ended before the step started";
  if (current === undefined) return "its workflow never dispatched it";
  return current === runId ? undefined : `it is not its step's current attempt (that is ${current})`;
}
