// The sandbox views the API answers with, built from the projections one sandbox at a time,
// and the live sandboxes with their placements as the Routes API and route groups read them.
import type * as pb from "@ephemera/proto";
import { Aggregates, decode, journaledValues, workflowId, type ValueJournal } from "@ephemera/events";
import type { EventStore } from "@ephemera/eventstore";
import { NotFoundError, errorMessage, type Logger } from "@ephemera/kit";
import type { SandboxProjections } from "../core/projections.js";
import type { PlacedSandbox } from "../routes/forks.js";
import { connectedLocals } from "./locals.js";
import type { SandboxRecord } from "./state.js";
import { buildView, safeView } from "./view.js";

export interface ViewDeps {
  store: EventStore;
  projections: SandboxProjections;
  /** The output journal, read for `sandbox get --show-outputs`. */
  values: ValueJournal;
  logger: Logger;
}

export class SandboxViews {
  /** Sandbox name → the last problem logged for it: as many entries as sandboxes held, at most. */
  private readonly unrenderable = new Map<string, string>();

  constructor(private readonly deps: ViewDeps) {}

  /** Every view the API answers with is built here, one sandbox at a time, and cannot throw (see safeView). */
  build(state: SandboxRecord, values: Map<string, Buffer> | undefined): pb.SandboxView {
    const { workflows, forks, locals } = this.deps.projections;
    const local = locals.get(state.routingKey)?.state;
    return safeView(state, () => buildView(state, workflows, values, forks.get(state.routingKey)?.state, local), (err) => {
      // Once per sandbox and problem: a client polling the list would repeat it every time.
      const problem = errorMessage(err);
      if (this.unrenderable.get(state.name) === problem) return;
      this.unrenderable.set(state.name, problem);
      this.deps.logger.warn({ err, sandbox: state.name }, "a stored sandbox cannot be shown in full; answering with what can be");
    });
  }

  /** Forgets what was logged of a sandbox that left memory. */
  forget(name: string): void {
    this.unrenderable.delete(name);
  }

  async view(name: string, showOutputs: boolean): Promise<pb.SandboxView> {
    const state = this.deps.projections.sandboxes.get(name)?.state;
    if (!state || state.status === "none" || state.status === "deleted") throw new NotFoundError(`sandbox ${name} not found`);
    return this.build(state, showOutputs ? await this.outputValues(state) : undefined);
  }

  list(): pb.SandboxView[] {
    const out: pb.SandboxView[] = [];
    for (const [, { state }] of this.deps.projections.sandboxes.entries()) {
      if (state.status === "active" || state.status === "deleting") out.push(this.build(state, undefined));
    }
    return out.sort((a, b) => a.name.localeCompare(b.name));
  }

  /**
   * Where the sandbox's forks are on its cluster: the last generation applied (while an
   * update's generation is being applied, the one before still serves).
   */
  forkPlacements(state: SandboxRecord): pb.ForkPlacement[] {
    return this.deps.projections.forks.get(state.routingKey)?.state.applied?.forks ?? [];
  }

  /**
   * Every live sandbox as the projection holds it (a deleted one has left it), with its
   * forks' placements, the local workloads a workstation serves now and their Services.
   */
  *placed(): Iterable<PlacedSandbox> {
    const { sandboxes, forks, locals } = this.deps.projections;
    for (const [, { state }] of sandboxes.entries()) {
      if (state.status === "none") continue;
      yield {
        sandbox: state, placements: this.forkPlacements(state),
        connected: connectedLocals(locals.get(state.routingKey)?.state),
        localPlacements: forks.get(state.routingKey)?.state.locals ?? [],
      };
    }
  }

  /** Output values live in the output journal, named with their digests by the step runs' result events; read on demand. */
  private async outputValues(state: SandboxRecord): Promise<Map<string, Buffer>> {
    const values = new Map<string, Buffer>();
    for (const r of state.resources) {
      const wf = this.deps.projections.workflows.get(workflowId(state.routingKey, r.name, "create"))?.state;
      for (const step of wf?.steps ?? []) {
        if (step.status !== "succeeded" || !step.runId) continue;
        for (const recorded of (await this.deps.store.read(Aggregates.steprun, step.runId)).events) {
          const e = decode(recorded);
          if (e?.type !== "ephemera.steprun.succeeded.v1") continue;
          for (const [name, value] of await journaledValues(this.deps.values, step.runId, e.data.outputs)) {
            values.set(`${r.name}/${step.name}.${name}`, value);
          }
        }
      }
    }
    return values;
  }
}
