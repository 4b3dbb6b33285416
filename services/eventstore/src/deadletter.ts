// Dead letters: what a consumer gave up on is recorded as an event of its own
// (`deadletter.<consumer>.<position>`), so it shows in `eph events` and never blocks the rest.
import { errorMessage, isRetryable } from "@ephemera/kit";
import { DEAD_LETTER_AGGREGATE, DEAD_LETTER_TYPE, NO_AGGREGATE, type DeadLetter, type EventStore } from "./types.js";

export function deadLetter(
  consumer: string, what: { aggregate: string; aggregateId: string; position: number; types: string[] }, deliveries: number, err: unknown,
): DeadLetter {
  return { consumer, ...what, deliveries, retryable: isRetryable(err), reason: errorMessage(err) };
}

/**
 * Appends the dead letter once (its id is deterministic, so a retried record is
 * deduplicated): `<consumer>.<position>` for a commit, `<consumer>.<key>` for a work item.
 */
export async function recordDeadLetter(store: EventStore, letter: DeadLetter, key = String(letter.position)): Promise<void> {
  const id = `${letter.consumer}.${key}`;
  const existing = await store.read(DEAD_LETTER_AGGREGATE, id);
  if (existing.version > 0) return;
  await store.append(DEAD_LETTER_AGGREGATE, id, NO_AGGREGATE, [{ type: DEAD_LETTER_TYPE, data: letter }], {
    source: letter.consumer, commitId: `${DEAD_LETTER_AGGREGATE}.${id}`,
  }).catch((err: unknown) => {
    // A concurrent record of the same letter is the same letter.
    if ((err as { code?: string }).code !== "concurrency") throw err;
  });
}
