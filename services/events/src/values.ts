// Output values journaled outside the events: a step run's result event names each output
// with its size and SHA-256, and the value lives in the output journal (an object store)
// under `<runId>/<output>`. Whoever reads a journaled value checks it against the digest.
import { createHash } from "node:crypto";
import type * as pb from "@ephemera/proto";

/** The output journal as the runner, the IO context and the API use it (eventstore implements it). */
export interface ValueJournal {
  /** Stores `value` under `key` (idempotent: the same value again changes nothing); resolves to its SHA-256 (hex). */
  put(key: string, value: Uint8Array): Promise<string>;
  /** The value under `key`; fails when it is missing or does not match `sha256`. */
  get(key: string, sha256: string): Promise<Buffer>;
}

export const sha256Hex = (value: Uint8Array) => createHash("sha256").update(value).digest("hex");
export const valueKey = (runId: string, output: string) => `${runId}/${output}`;

/** Journals a run's outputs; the result is what its `steprun.succeeded` event holds (no values). */
export async function journalOutputs(journal: ValueJournal, runId: string, outputs: Array<Pick<pb.OutputValue, "name" | "value">>): Promise<pb.OutputValue[]> {
  const journaled: pb.OutputValue[] = [];
  for (const o of outputs) {
    const sha256 = await journal.put(valueKey(runId, o.name), o.value);
    journaled.push({ name: o.name, value: Buffer.alloc(0), size: o.value.length, sha256 });
  }
  return journaled;
}

/** The values of a run's journaled outputs (inline in events written before the journal existed). */
export async function journaledValues(journal: ValueJournal, runId: string, outputs: pb.OutputValue[], wanted?: string[]): Promise<Map<string, Buffer>> {
  const values = new Map<string, Buffer>();
  for (const o of outputs) {
    if (wanted && !wanted.includes(o.name)) continue;
    values.set(o.name, o.sha256 ? await journal.get(valueKey(runId, o.name), o.sha256) : Buffer.from(o.value));
  }
  return values;
}

/** The size of a journaled output, wherever its value is. */
export const outputSize = (o: pb.OutputValue) => (o.sha256 ? o.size : o.value.length);
