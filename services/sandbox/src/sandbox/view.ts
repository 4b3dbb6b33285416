// The SandboxView of the API, built from the sandbox and its workflows.
import * as pb from "@ephemera/proto";
import { workflowId } from "@ephemera/events";
import type { WorkflowProgress } from "../workflow/progress.js";
import type { SandboxRecord } from "./state.js";
import type { Projection } from "@ephemera/eventstore";
import { sandboxStatus } from "./status.js";
import { baselineLabel, baselineOf, errorMessage } from "@ephemera/kit";
import { placementsOf, type ForkFacts } from "./forks.js";
import { localStatus, type LocalLinks } from "./locals.js";

const STATUS: Record<string, string> = {
  pending: "Pending", queued: "Queued", running: "Running", retrying: "Retrying", succeeded: "Succeeded", failed: "Failed", cancelled: "Cancelled",
};
const title = (s: string) => STATUS[s] ?? s;

/** The create and delete workflows of a sandbox's resources, those that started. */
export function workflowsOf(s: SandboxRecord, workflows: Projection<WorkflowProgress>): WorkflowProgress[] {
  return s.resources.flatMap((r) => (["create", "delete"] as const)
    .flatMap((phase) => workflows.get(workflowId(s.routingKey, r.name, phase))?.state ?? []));
}

/** `values` keys are `<resource>/<step>.<output>`; without it, outputs carry names and sizes only. */
export function buildView(
  s: SandboxRecord, workflows: Projection<WorkflowProgress>, values: Map<string, Buffer> | undefined, forks?: ForkFacts, locals?: LocalLinks,
): pb.SandboxView {
  const mine = workflowsOf(s, workflows);
  const workloads = workloadsOf(s, forks, locals);
  return pb.SandboxView.fromPartial({
    name: s.name,
    routingKey: s.routingKey,
    spec: s.spec,
    status: withLocals(sandboxStatus(s, mine), workloads),
    endpoints: s.endpoints,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
    workloads,
    resources: s.resources.map((r) => {
      const steps = (["create", "delete"] as const).flatMap((phase) => {
        const wf = workflows.get(workflowId(s.routingKey, r.name, phase))?.state;
        return wf ? stepViews(wf, phase) : [];
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

/** The steps of one workflow as the API shows them, each with its attempts. */
export function stepViews(wf: WorkflowProgress, phase: "create" | "delete"): pb.StepView[] {
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
        queuedAt: a.queuedAt ?? "", startedAt: a.startedAt ?? "", endedAt: a.endedAt ?? "",
      })),
      dependsOn: st.dependsOn,
    });
  });
}

/**
 * The view of one sandbox, which cannot fail: a stored record that cannot be rendered in
 * full (written by an older version, or beyond today's limits) is shown as it is stored,
 * with status RenderError and what is wrong in `renderError`, so that one bad record never
 * fails a list, a get or a watch. Only the error's message is kept, never a stack.
 */
export function safeView(s: SandboxRecord, build: () => pb.SandboxView, onError?: (err: unknown) => void): pb.SandboxView {
  try {
    return build();
  } catch (err) {
    onError?.(err);
    const problem = errorMessage(err);
    return pb.SandboxView.fromPartial({
      name: s.name, routingKey: s.routingKey, spec: s.spec, endpoints: s.endpoints, createdAt: s.createdAt, updatedAt: s.updatedAt,
      status: { ready: false, reason: "RenderError", message: `the stored sandbox cannot be shown in full: ${problem}` },
      renderError: problem,
    });
  }
}

/**
 * A disconnected local workload does not make a ready sandbox unready (as with Signadot): its
 * forks and resources serve on, and the key's requests for that workload go to the baseline
 * meanwhile. The status's message names it, and the workload's own status says why.
 */
function withLocals(status: pb.SandboxStatus, workloads: pb.WorkloadView[]): pb.SandboxStatus {
  const away = workloads.filter((w) => w.kind === "local" && w.status !== "Connected").map((w) => w.name);
  if (!status.ready || !away.length) return status;
  return { ...status, message: `${status.message}; local workload${away.length > 1 ? "s" : ""} ${away.join(", ")} not connected (the baseline serves them)` };
}

/** Virtual workloads are kept with the sandbox, never run: nothing creates them yet. */
export const NOT_RUN = "virtual workloads are validated and kept, not run";

/**
 * Forks as their cluster's runner reports them; locals as the tunnel reports them: Connected
 * while a workstation serves them (eph local connect), else Disconnected and why.
 */
function workloadsOf(s: SandboxRecord, facts: ForkFacts | undefined, locals: LocalLinks | undefined): pb.WorkloadView[] {
  const spec = s.spec;
  if (!spec) return [];
  const forkName = (f: pb.Fork, i: number) => f.name || `${f.forkOf?.kind ?? "workload"}/${f.forkOf?.name ?? i}`.toLowerCase();
  const placed = new Map(placementsOf(facts, s.forks.requested).map((p) => [p.fork, p]));
  const outcome = facts?.outcome?.generation === s.forks.requested ? facts.outcome : undefined;
  const fork = (f: pb.Fork, i: number): pb.WorkloadView => {
    const label = baselineLabel(baselineOf(f.forkOf));
    const p = placed.get(label);
    const where = { workload: p?.workload ? baselineLabel(baselineOf(p.workload)) : "", hosts: p?.services.map((x) => x.host) ?? [] };
    const view = (status: string, message: string) => ({ kind: "fork", name: forkName(f, i), status, message, ...where });
    const f0 = s.forks;
    if (s.status === "deleting") return view("Removing", f0.requestedCount === 0 && f0.available === f0.requested ? "removed" : `being removed from cluster ${s.cluster}`);
    if (f0.failure) {
      const mine = f0.failure.fork === label || !f0.failure.fork;
      return view("Failed", mine ? `${f0.failure.reason}: ${f0.failure.message}` : `not applied: the fork of ${f0.failure.fork} failed`);
    }
    if (f0.requested < f0.generation || f0.requested === 0) return view("Pending", "created once every resource is ready");
    if (outcome?.kind === "skipped") return view("Skipped", outcome.message ?? "");
    if (f0.available === f0.requested) return view("Available", `fork of ${label}`);
    return p ? view("Progressing", `applied to cluster ${s.cluster}; waiting for it to be available`) : view("Applying", `asked of cluster ${s.cluster}'s runner`);
  };
  return [
    ...spec.forks.map(fork),
    ...spec.virtual.map((v) => ({ kind: "virtual", name: v.name, status: "Pending", message: NOT_RUN, workload: "", hosts: [] })),
    ...spec.local.map((l) => {
      const placed = facts?.locals?.find((p) => p.local === l.name);
      const link = locals?.get(l.name);
      return {
        kind: "local", name: l.name, ...localStatus(link, placed),
        workload: baselineLabel(baselineOf(l.from)),
        hosts: link?.kind === "connected" ? placed?.services.map((x) => x.host) ?? [] : [],
      };
    }),
  ];
}
