// The scheduler's metrics, counted from the events its own decisions append (never from a
// replay at start, so a restart counts nothing twice): workflows started and ended, how
// long they took, and the steps dispatched.
import type { RecordedEvent } from "@ephemera/eventstore";
import { Counter, DURATION_BUCKETS, Histogram, type Registry } from "@ephemera/kit/metrics";
import type { WorkflowState } from "./workflow/state.js";

export interface WorkflowMetrics {
  /** Events appended to one workflow, and its state once they are applied. */
  appended(events: readonly RecordedEvent[], state: WorkflowState): void;
}

const ENDED: Record<string, "succeeded" | "failed" | "cancelled"> = {
  "ephemera.workflow.succeeded.v1": "succeeded",
  "ephemera.workflow.failed.v1": "failed",
  "ephemera.workflow.cancelled.v1": "cancelled",
};

export function workflowMetrics(registry: Registry): WorkflowMetrics {
  const started = new Counter({
    name: "ephemera_scheduler_workflows_started_total", labelNames: ["phase"], registers: [registry],
    help: "Workflows started (a retry of a failed workflow counts as a start), by phase (create, delete)",
  });
  const ended = new Counter({
    name: "ephemera_scheduler_workflows_ended_total", labelNames: ["phase", "outcome"], registers: [registry],
    help: "Workflows ended, by phase and outcome (succeeded, failed, cancelled)",
  });
  const duration = new Histogram({
    name: "ephemera_scheduler_workflow_duration_seconds", labelNames: ["phase", "outcome"], buckets: DURATION_BUCKETS, registers: [registry],
    help: "Time from a workflow's start (or its last retry) to its end, by phase and outcome",
  });
  const dispatched = new Counter({
    name: "ephemera_scheduler_steps_dispatched_total", labelNames: ["phase"], registers: [registry],
    help: "Step attempts dispatched to runners, by phase",
  });
  return {
    appended: (events, state) => {
      if (state.status === "none") return;
      const phase = state.started.phase;
      for (const e of events) {
        if (e.type === "ephemera.workflow.started.v1" || e.type === "ephemera.workflow.retried.v1") started.inc({ phase });
        else if (e.type === "ephemera.workflow.step_dispatched.v1") dispatched.inc({ phase });
        const outcome = ENDED[e.type];
        if (!outcome) continue;
        ended.inc({ phase, outcome });
        duration.observe({ phase, outcome }, Math.max(0, Date.parse(e.time) - state.startedAt) / 1000);
      }
    },
  };
}
