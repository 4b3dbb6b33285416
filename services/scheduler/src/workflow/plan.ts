// Planning a workflow from a plugin's steps: the valueFromStep references within the
// phase are the DAG edges. References from delete steps to create steps are not edges:
// those values come from the create workflow, already finished. Each planned step carries
// its deadline and retry count, so the workflow's timers need nothing else.
import type * as pb from "@ephemera/proto";
import type { Phase } from "@ephemera/events";
import { parseDuration } from "@ephemera/kit/duration";
import { DEFAULT_STEP_TIMEOUT_MS } from "./policy.js";

export function planSteps(spec: pb.ResourcePluginSpec, phase: Phase): pb.PlannedStep[] {
  const steps = phase === "create" ? spec.create : spec.delete;
  const names = new Set(steps.map((s) => s.name));
  return steps.map((s) => ({
    name: s.name,
    dependsOn: [...new Set(s.inputs.flatMap((i) => (i.valueFromStep && names.has(i.valueFromStep.name) ? [i.valueFromStep.name] : [])))],
    timeoutMs: parseDuration(s.timeout ?? "") ?? DEFAULT_STEP_TIMEOUT_MS,
    retries: s.retries ?? 0,
  }));
}
