// The sandbox service's reactions, competing across replicas on one durable consumer: a
// sandbox records the end of its resources' workflows and its runner's answer on forks, and
// a sandbox gone or a plugin changed may let a version being deleted go.
import { Aggregates, encode, workflowId } from "@ephemera/events";
import { execute, type EventStore, type Subscription } from "@ephemera/eventstore";
import { isTerminal } from "@ephemera/scheduler/decider";
import type { SandboxProjections } from "../core/projections.js";
import { decideSandbox } from "./decide.js";

/** The commit a reaction answers: its commits carry its correlation id and are caused by its first event. */
export interface Cause {
  correlationId: string;
  causationId: string;
}

/** Records the end of each resource's workflows on the sandbox, and the runner's answer to its last request of forks, once. */
export async function reconcileSandbox(store: EventStore, projections: SandboxProjections, name: string, cause?: Cause): Promise<void> {
  const { sandboxes, workflows, forks } = projections;
  const state = sandboxes.get(name)?.state;
  if (!state || state.status === "none" || state.status === "deleted") return;
  for (const r of state.resources) {
    for (const phase of ["create", "delete"] as const) {
      const id = workflowId(state.routingKey, r.name, phase);
      const wf = workflows.get(id)?.state;
      if (!wf || !isTerminal(wf.status) || wf.status === "cancelled") continue;
      // After a retry, only the outcome of the retried workflow counts.
      if (phase === "create" && wf.retried < r.retries) continue;
      if (phase === "delete" && wf.retried < r.deprovisionRetries) continue;
      await execute(store, sandboxes, name, (s) => decideSandbox({
        kind: "workflow-ended", resource: r.name, phase, workflowId: id,
        outcome: wf.status === "succeeded" ? "succeeded" : "failed",
        outputs: wf.steps.flatMap((st) => st.outputs.map((o) => ({ key: `${st.name}.${o.key}`, size: o.size }))),
        failure: wf.failure,
      }, s).map(encode), { source: "sandbox", command: `workflow-ended:${id}`, ...cause });
    }
  }
  const requested = sandboxes.get(name)?.state;
  if (!requested || requested.status === "none" || !requested.forks.requested) return;
  const outcome = forks.get(requested.routingKey)?.state.outcome;
  if (!outcome || outcome.generation !== requested.forks.requested) return;
  await execute(store, sandboxes, name, (s) => decideSandbox({
    kind: "forks-reported", generation: outcome.generation, outcome: outcome.kind, ...(outcome.failure ? { failure: outcome.failure } : {}),
  }, s).map(encode), { source: "sandbox", command: `forks-reported:${outcome.generation}`, ...cause });
}

export interface ReactorDeps {
  store: EventStore;
  projections: SandboxProjections;
  /** Removes the plugin's versions being deleted that no sandbox uses. */
  removeUnusedVersions: (plugin: string) => Promise<void>;
}

export class SandboxReactor {
  private subscription?: Subscription;

  constructor(private readonly deps: ReactorDeps) {}

  /** What may have happened while no replica reacted: every sandbox held, and every plugin held, reconciled. */
  async reconcileHeld(): Promise<void> {
    for (const [name] of this.deps.projections.sandboxes.entries()) await reconcileSandbox(this.deps.store, this.deps.projections, name);
    for (const [name] of this.deps.projections.plugins.entries()) await this.deps.removeUnusedVersions(name);
  }

  /** Reacts to the commits from `from` on, on the durable consumer the replicas share. */
  start(from: number): void {
    const { store, projections } = this.deps;
    this.subscription = store.subscribe({ durable: "sandbox", from }, async (c) => {
      await projections.feed.waitFor(c.position);
      const name = projections.sandboxOf(c);
      const first = c.events[0];
      if (name) await reconcileSandbox(store, projections, name, first && { correlationId: first.correlationId, causationId: first.id });
      // A sandbox that went away may free a plugin version being deleted (a few plugins at most have one).
      if (c.aggregate === Aggregates.sandbox && c.events.some((e) => e.type === "ephemera.sandbox.deleted.v1")) {
        for (const [plugin, { state }] of projections.plugins.entries()) {
          if ([...state.versions.values()].some((v) => v.deleting)) await this.deps.removeUnusedVersions(plugin);
        }
      }
      if (c.aggregate === Aggregates.plugin) await this.deps.removeUnusedVersions(c.aggregateId);
    });
  }

  async stop(): Promise<void> {
    await this.subscription?.stop();
  }
}
