// What the sandbox service knows of its sandboxes' forks on their clusters: the runners'
// forks events (one aggregate per routing key) folded into the shape the views and the
// Routes API read. The runner owns those events; this is only their consumer's view.
import type * as pb from "@ephemera/proto";
import type { DomainEvent } from "@ephemera/events";

export interface ForkFacts {
  /** The last generation written to the cluster, and where each fork of it is. */
  applied?: { generation: number; forks: pb.ForkPlacement[] };
  /** The last generation the runner finished with, and how. */
  outcome?: { generation: number; kind: "available" | "skipped" | "failed"; failure?: pb.ForkFailure; message?: string };
  /** The Services the runner keeps for the sandbox's connected local workloads, as it last recorded them. */
  locals?: pb.LocalPlacement[];
}

export const noForkFacts = (): ForkFacts => ({});

export function foldForkFacts(state: ForkFacts, event: DomainEvent): ForkFacts {
  switch (event.type) {
    case "ephemera.forks.applied.v1":
      return { ...state, applied: { generation: event.data.generation, forks: event.data.forks } };
    case "ephemera.forks.available.v1":
      return { ...state, outcome: { generation: event.data.generation, kind: "available" } };
    case "ephemera.forks.skipped.v1":
      return { ...state, outcome: { generation: event.data.generation, kind: "skipped", message: event.data.message } };
    case "ephemera.forks.failed.v1":
      return { ...state, outcome: { generation: event.data.generation, kind: "failed", ...(event.data.failure ? { failure: event.data.failure } : {}) } };
    case "ephemera.forks.locals_applied.v1":
      return { ...state, locals: event.data.locals };
    default:
      return state;
  }
}

/** The placements of the generation the sandbox last asked for (none until it is applied). */
export function placementsOf(facts: ForkFacts | undefined, requested: number): pb.ForkPlacement[] {
  return facts?.applied && facts.applied.generation === requested ? facts.applied.forks : [];
}
