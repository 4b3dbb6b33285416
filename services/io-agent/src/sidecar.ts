// The sidecar agent: after the script exits 0, reads each declared output from its
// `valueFromPath` and stores the values in the IO context.
import { readFile, stat } from "node:fs/promises";
import type * as pb from "@ephemera/proto";
import { FailureReason, MAX_OUTPUT_BYTES } from "./report.js";

export type CollectedOutputs =
  | { ok: true; values: pb.OutputValue[] }
  | { ok: false; reason: typeof FailureReason.OutputMissing | typeof FailureReason.OutputTooLarge; message: string };

/** Reads the outputs; the first missing or oversized one fails the step, naming it. */
export async function collectOutputs(
  outputs: Array<{ name: string; path: string }>,
  limit = MAX_OUTPUT_BYTES,
): Promise<CollectedOutputs> {
  const values: pb.OutputValue[] = [];
  for (const o of outputs) {
    const info = await stat(o.path).catch(() => undefined);
    if (!info?.isFile()) {
      return outputMissing(o);
    }
    // Checked before reading (a huge file is never loaded) and after (it may have grown).
    const value = info.size > limit ? undefined : await readFile(o.path);
    if (!value || value.length > limit) {
      const size = value?.length ?? info.size;
      return outputTooLarge(o, size, limit);
    }
    values.push({ name: o.name, value, size: value.length, sha256: "" });
  }
  return { ok: true, values };
}

/** The failures of a declared output, as every driver words them. */
export const outputMissing = (o: { name: string; path: string }) =>
  ({ ok: false, reason: FailureReason.OutputMissing, message: `output "${o.name}": the script did not write ${o.path}` }) as const;

export const outputTooLarge = (o: { name: string; path: string }, size: number, limit = MAX_OUTPUT_BYTES) =>
  ({ ok: false, reason: FailureReason.OutputTooLarge, message: `output "${o.name}": ${o.path} is ${size} bytes, over the ${limit}-byte limit` }) as const;
