// The SandboxView of the API, built from the sandbox and its workflows.
import * as pb from "@ephemera/proto";
import { workflowId } from "@ephemera/events";
import type { WorkflowState } from "../progress.js";
import type { SandboxRecord } from "./state.js";
import type { Projection } from "@ephemera/eventstore";
import { sandboxStatus } from "./status.js";

const STATUS: Record<string, string> = {
  pending: "Pending", queued: "Queued", running: "Running", retrying: "Retrying", succeeded: "Succeeded", failed: "Failed", cancelled: "Cancelled",
};
const title = (s: string) => STATUS[s] ?? s;

/** The create and delete workflows of a sandbox's resources, those that started. */
export function workflowsOf(s: SandboxRecord, workflows: Projection<WorkflowState>): WorkflowState[] {
  return s.resources.flatMap((r) => (["create", "delete"] as const)
    .flatMap((phase) => workflows.get(workflowId(s.routingKey, r.name, phase))?.state ?? []));
}

/** `values` keys are `<resource>/<step>.<output>`; without it, outputs carry names and sizes only. */
export function buildView(s: SandboxRecord, workflows: Projection<WorkflowState>, values: Map<string, Buffer> | undefined): pb.SandboxView {
  const mine = workflowsOf(s, workflows);
  return pb.SandboxView.fromPartial({
    name: s.name,
    routingKey: s.routingKey,
    spec: s.spec,
    status: sandboxStatus(s, mine),
    endpoints: s.endpoints,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
    workloads: workloadsOf(s.spec),
    resources: s.resources.map((r) => {
      const steps = (["create", "delete"] as const).flatMap((phase) => {
        const wf = workflows.get(workflowId(s.routingKey, r.name, phase))?.state;
        if (!wf) return [];
        return wf.steps.map((st) => {
          const last = st.attempts.at(-1);
          const failure = last?.failure ?? (wf.failure?.step === st.name ? wf.failure : undefined);
          const cancelled = wf.status === "cancelled" && st.status === "pending";
          const message = st.status === "retrying" ? `attempt ${st.attempt} failed (${failure?.reason ?? "?"}); next attempt at ${st.retryAt}`
            : st.unclaimed && st.status === "queued" ? `no runner for cluster ${st.unclaimed.cluster} has taken it` : "";
          return pb.StepView.fromPartial({
            name: st.name, phase, attempt: st.attempt, runId: st.runId ?? "",
            status: cancelled ? "Cancelled" : title(st.status),
            exitCode: failure?.exitCode, reason: failure?.reason ?? "", message,
            attempts: st.attempts.map((a) => ({
              attempt: a.attempt, runId: a.runId, status: title(a.status), reason: a.failure?.reason ?? "", exitCode: a.failure?.exitCode,
            })),
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

/**
 * Forks and virtual workloads need a cluster driver to run; until there is one they are
 * Pending, never shown as ready. A local workload runs on its user's machine (eph sandbox
 * get-env / get-files give it what it needs).
 */
export const NO_CLUSTER_DRIVER = "no cluster driver: forks and virtual workloads run once the Kubernetes driver does";

function workloadsOf(spec: pb.SandboxSpec | undefined): pb.WorkloadView[] {
  if (!spec) return [];
  const forkName = (f: pb.Fork, i: number) => f.name || `${f.forkOf?.kind ?? "workload"}/${f.forkOf?.name ?? i}`.toLowerCase();
  return [
    ...spec.forks.map((f, i) => ({ kind: "fork", name: forkName(f, i), status: "Pending", message: NO_CLUSTER_DRIVER })),
    ...spec.virtual.map((v) => ({ kind: "virtual", name: v.name, status: "Pending", message: NO_CLUSTER_DRIVER })),
    ...spec.local.map((l) => ({ kind: "local", name: l.name, status: "Local", message: `runs on its user's machine: eph sandbox get-env / get-files --local ${l.name}` })),
  ];
}
