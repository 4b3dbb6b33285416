// A commit as stored in the events stream: the list of its events, without what the message
// itself says (its subject names the aggregate, its sequence is the position).
import type { JsMsg } from "@nats-io/jetstream";
import type { Commit, RecordedEvent } from "./types.js";

export type StoredEvent = Omit<RecordedEvent, "aggregate" | "position">;

export function decodeCommit(aggregate: string, aggregateId: string, position: number, stored: StoredEvent[]): Commit {
  return { aggregate, aggregateId, position, events: stored.map((e) => ({ ...e, aggregate, position })) };
}

/**
 * A delivered message of `<prefix>.ev.<aggregate>.<id>` as its commit. Its events are parsed
 * when first read: a feed passes most commits by on their aggregate alone (the runner's
 * three feeds take no step run or workflow commit, which are most of a step's), and its
 * JSON is then never parsed.
 */
export function commitOf(m: JsMsg): Commit {
  const tokens = m.subject.split(".");
  const aggregate = tokens[2]!;
  const aggregateId = tokens.slice(3).join(".");
  let events: RecordedEvent[] | undefined;
  return {
    aggregate, aggregateId, position: m.seq,
    get events() {
      return (events ??= decodeCommit(aggregate, aggregateId, m.seq, m.json<StoredEvent[]>()).events);
    },
  };
}
