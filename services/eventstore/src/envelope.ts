// Building envelopes for a commit; shared by both store implementations.
import type { AppendMeta, NewEvent, RecordedEvent } from "./types.js";

export interface EnvelopeContext {
  aggregate: string;
  aggregateId: string;
  firstSequence: number;
  position: number;
  now: () => Date;
  newId: () => string;
}

export function envelopes(events: NewEvent[], meta: AppendMeta, ctx: EnvelopeContext): RecordedEvent[] {
  const time = ctx.now().toISOString();
  const ids = events.map((e) => e.id ?? ctx.newId());
  const correlationId = meta.correlationId ?? ids[0] ?? ctx.newId();
  return events.map((e, i) => ({
    specversion: "1.0",
    id: ids[i]!,
    type: e.type,
    source: meta.source,
    subject: ctx.aggregateId,
    time,
    datacontenttype: "application/json",
    data: e.data,
    correlationId,
    causationId: meta.causationId ?? correlationId,
    ...(meta.actor ? { actor: meta.actor } : {}),
    sequence: ctx.firstSequence + i,
    aggregate: ctx.aggregate,
    position: ctx.position,
  }));
}

/** The envelope as stored: without the fields derived from where it is stored. */
export function storedForm(e: RecordedEvent): Omit<RecordedEvent, "aggregate" | "position"> {
  const { aggregate: _a, position: _p, ...rest } = e;
  return rest;
}
