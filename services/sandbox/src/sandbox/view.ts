// The SandboxView of the API, built from the sandbox and its workflows.
import * as pb from "@ephemera/proto";
import { workflowId, type SandboxState, type WorkflowState } from "@ephemera/events";
import type { Projection } from "@ephemera/eventstore";
import { sandboxStatus } from "./status.js";

const STEP_STATUS: Record<string, string> = { pending: "Pending", running: "Running", succeeded: "Succeeded", failed: "Failed" };

/** `values` keys are `<resource>/<step>.<output>`; without it, outputs carry names and sizes only. */
export function buildView(s: SandboxState, workflows: Projection<WorkflowState>, values: Map<string, Buffer> | undefined): pb.SandboxView {
  return pb.SandboxView.fromPartial({
    name: s.name,
    routingKey: s.routingKey,
    spec: s.spec,
    status: sandboxStatus(s),
    endpoints: s.endpoints,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
    resources: s.resources.map((r) => {
      const steps = (["create", "delete"] as const).flatMap((phase) => {
        const wf = workflows.get(workflowId(s.routingKey, r.name, phase))?.state;
        if (!wf) return [];
        return wf.steps.map((st) => {
          const failure = wf.failure?.step === st.name ? wf.failure : undefined;
          const cancelled = wf.status === "cancelled" && st.status === "pending";
          return pb.StepView.fromPartial({
            name: st.name, phase, attempt: st.attempt, runId: st.runId ?? "",
            status: cancelled ? "Cancelled" : STEP_STATUS[st.status] ?? st.status,
            exitCode: failure?.exitCode, reason: failure?.reason ?? "",
          });
        });
      });
      return pb.ResourceView.fromPartial({
        name: r.name,
        plugin: r.plugin,
        version: r.version,
        status: r.status,
        failure: r.failure,
        steps,
        outputs: r.outputs.map((o) => ({ key: o.key, size: o.size, value: values?.get(`${r.name}/${o.key}`) })),
      });
    }),
  });
}
