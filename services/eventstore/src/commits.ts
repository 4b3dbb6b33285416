// A commit as stored in the events stream: the list of its events, without what the message
// itself says (its subject names the aggregate, its sequence is the position).
import type { JsMsg } from "@nats-io/jetstream";
import type { Commit, RecordedEvent } from "./types.js";

export type StoredEvent = Omit<RecordedEvent, "aggregate" | "position">;

export function decodeCommit(aggregate: string, aggregateId: string, position: number, stored: StoredEvent[]): Commit {
  return { aggregate, aggregateId, position, events: stored.map((e) => ({ ...e, aggregate, position })) };
}

/** A delivered message of `<prefix>.ev.<aggregate>.<id>` as its commit. */
export function commitOf(m: JsMsg): Commit {
  const tokens = m.subject.split(".");
  return decodeCommit(tokens[2]!, tokens.slice(3).join("."), m.seq, m.json<StoredEvent[]>());
}
