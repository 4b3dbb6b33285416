// What the IO context knows from the event stream: plugin specs, workflows (their params,
// dispatched runs and the run that produced each step's outputs) and sandbox routing keys.
import type * as pb from "@ephemera/proto";
import { Aggregates, decode, type DomainEvent } from "@ephemera/events";
import { Projection, type RecordedEvent } from "@ephemera/eventstore";

export interface PluginView {
  /** Every version ever published: a running workflow keeps using its version's spec. */
  specs: ReadonlyMap<string, pb.ResourcePluginSpec>;
}

export interface WorkflowView {
  started?: pb.WorkflowStarted;
  dispatched: ReadonlySet<string>;
  /** step name → the run id whose outputs count */
  succeeded: ReadonlyMap<string, string>;
}

export interface SandboxView {
  routingKey: string;
}

export const emptyWorkflow = (): WorkflowView => ({ dispatched: new Set(), succeeded: new Map() });

export function evolvePlugin(state: PluginView, e: DomainEvent): PluginView {
  if (e.type !== "ephemera.plugin.published.v1" || !e.data.spec) return state;
  return { specs: new Map(state.specs).set(e.data.version, e.data.spec) };
}

export function evolveWorkflow(state: WorkflowView, e: DomainEvent): WorkflowView {
  switch (e.type) {
    case "ephemera.workflow.started.v1":
      return { ...state, started: e.data };
    case "ephemera.workflow.step_dispatched.v1":
      return { ...state, dispatched: new Set(state.dispatched).add(e.data.runId) };
    case "ephemera.workflow.step_succeeded.v1":
      return { ...state, succeeded: new Map(state.succeeded).set(e.data.step, e.data.runId) };
    default:
      return state;
  }
}

export function evolveSandbox(state: SandboxView, e: DomainEvent): SandboxView {
  return e.type === "ephemera.sandbox.created.v1" ? { routingKey: e.data.routingKey } : state;
}

const decoded = <S>(evolve: (s: S, e: DomainEvent) => S) => (s: S, r: RecordedEvent): S => {
  const e = decode(r);
  return e ? evolve(s, e) : s;
};

export function projections() {
  return {
    plugins: new Projection<PluginView>(Aggregates.plugin, () => ({ specs: new Map() }), decoded(evolvePlugin)),
    workflows: new Projection<WorkflowView>(Aggregates.workflow, emptyWorkflow, decoded(evolveWorkflow)),
    sandboxes: new Projection<SandboxView>(Aggregates.sandbox, () => ({ routingKey: "" }), decoded(evolveSandbox)),
  };
}
export type Projections = ReturnType<typeof projections>;
