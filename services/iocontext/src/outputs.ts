// The output store port: a cache of step outputs (run → output name → bytes), grouped by
// sandbox incarnation so a deleted sandbox's values can be dropped together. The values
// are also journaled in `steprun.succeeded` events, which stay the source of truth.
import type * as pb from "@ephemera/proto";

export type OutputValue = Pick<pb.OutputValue, "name" | "value">;

/** Every method rejects with `UnavailableError` when the backend cannot answer. */
export interface OutputStore {
  /** The stored outputs of a run; empty when it has none (or the cache lost them). */
  read(runId: string): Promise<Map<string, Buffer>>;
  /** Stores outputs of a run, overwriting outputs of the same name and keeping the others. */
  write(runId: string, routingKey: string, outputs: OutputValue[]): Promise<void>;
  /** Drops every run written under this routing key; returns how many runs went. */
  dropSandbox(routingKey: string): Promise<number>;
}
