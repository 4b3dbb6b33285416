// What the IO context knows from the event stream, folded into its own shapes: each
// workflow's runs (which it dispatched, which succeeded), the plugin versions' specs, and
// the routing key of each sandbox (to drop its outputs when it is deleted).
import type * as pb from "@ephemera/proto";
import { Aggregates, folding, type DomainEvent } from "@ephemera/events";
import { Projection } from "@ephemera/eventstore";

export interface WorkflowView {
  started?: pb.WorkflowStarted;
  /** `digests`: of the succeeded run's outputs, name → hex SHA-256 (those its step_succeeded carried). */
  steps: Array<{ name: string; current?: string; succeeded?: string; digests?: Record<string, string> }>;
}

/** Whether the workflow dispatched this run (the current attempt of one of its steps). */
export const dispatched = (w: WorkflowView, runId: string): boolean => w.steps.some((s) => s.current === runId);

/** The run whose outputs count for a step: the one that succeeded. */
export const succeededRun = (w: WorkflowView | undefined, step: string): string | undefined => w?.steps.find((s) => s.name === step)?.succeeded;

/** The digest the step's succeeded run journaled for an output; undefined when its event carried none. */
export const outputDigest = (w: WorkflowView | undefined, step: string, output: string): string | undefined =>
  w?.steps.find((s) => s.name === step)?.digests?.[output];

export const initialWorkflowView = (): WorkflowView => ({ steps: [] });

export function foldWorkflow(w: WorkflowView, e: DomainEvent): WorkflowView {
  const step = (name: string, f: (s: WorkflowView["steps"][number]) => WorkflowView["steps"][number]) => ({
    ...w, steps: w.steps.some((s) => s.name === name) ? w.steps.map((s) => (s.name === name ? f(s) : s)) : [...w.steps, f({ name })],
  });
  switch (e.type) {
    case "ephemera.workflow.started.v1":
      return { started: e.data, steps: e.data.steps.map((s) => ({ name: s.name })) };
    case "ephemera.workflow.step_dispatched.v1":
      return step(e.data.step, (s) => ({ ...s, current: e.data.runId }));
    case "ephemera.workflow.step_succeeded.v1":
      return step(e.data.step, (s) => ({
        ...s, succeeded: e.data.runId, digests: Object.fromEntries(e.data.outputs.flatMap((o) => (o.sha256 ? [[o.key, o.sha256]] : []))),
      }));
    case "ephemera.workflow.retried.v1": {
      // A retried step's earlier success no longer counts (only failed steps are retried, but be exact).
      const again = new Set(e.data.steps);
      return { ...w, steps: w.steps.map((s) => (again.has(s.name) ? { name: s.name, ...(s.current ? { current: s.current } : {}) } : s)) };
    }
    default:
      return w;
  }
}

export interface PluginSpecs { versions: Map<string, { spec: pb.ResourcePluginSpec }> }

export function foldPlugin(p: PluginSpecs, e: DomainEvent): PluginSpecs {
  if (e.type === "ephemera.plugin.published.v1") return { versions: new Map(p.versions).set(e.data.version, { spec: e.data.spec! }) };
  if (e.type === "ephemera.plugin.version_deleted.v1") {
    const versions = new Map(p.versions);
    versions.delete(e.data.version);
    return { versions };
  }
  return p;
}

/** A sandbox's routing key, and whether it is deleted (then it leaves memory). */
export interface SandboxKey { routingKey: string; deleted?: boolean }

export function foldSandbox(s: SandboxKey, e: DomainEvent): SandboxKey {
  if (e.type === "ephemera.sandbox.created.v1") return { routingKey: e.data.routingKey };
  if (e.type === "ephemera.sandbox.deleted.v1") return { ...s, deleted: true };
  return s;
}

/**
 * Live state only: a deleted sandbox, a plugin with no version left, and a workflow whose
 * routing key no live sandbox has (`live`, kept by the caller) leave memory.
 */
export function projections(live: (routingKey: string) => boolean = () => true) {
  return {
    plugins: new Projection<PluginSpecs>(Aggregates.plugin, () => ({ versions: new Map() }), folding(foldPlugin), { retired: (p) => p.versions.size === 0 }),
    workflows: new Projection<WorkflowView>(Aggregates.workflow, initialWorkflowView, folding(foldWorkflow), {
      retired: (_, id) => !live(id.split(".")[0]!),
    }),
    sandboxes: new Projection<SandboxKey>(Aggregates.sandbox, () => ({ routingKey: "" }), folding(foldSandbox), { retired: (s) => !!s.deleted }),
  };
}
export type Projections = ReturnType<typeof projections>;
