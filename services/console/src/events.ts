// The event list as the console asks for it: the API's envelopes (output values already
// redacted by it), between two times, at most the last `limit`. Pure.
import type * as pb from "@ephemera/proto";
import { ConsoleRequestError } from "./errors.js";

export const DEFAULT_EVENT_LIMIT = 500;
export const MAX_EVENT_LIMIT = 5_000;

export interface EventQuery {
  sandbox: string;
  type: string;
  /** ms since epoch; undefined: unbounded. */
  since?: number;
  until?: number;
  limit: number;
}

export type ConsoleEvent = Record<string, unknown>;

function time(query: URLSearchParams, name: string): number | undefined {
  const text = query.get(name);
  if (!text) return undefined;
  const ms = Date.parse(text);
  if (Number.isNaN(ms)) throw new ConsoleRequestError(400, "INVALID_ARGUMENT", `${name}: "${text}" is not an RFC 3339 time (e.g. 2026-01-02T15:04:05Z)`);
  return ms;
}

export function parseEventQuery(query: URLSearchParams): EventQuery {
  const limitText = query.get("limit");
  const limit = limitText ? Number(limitText) : DEFAULT_EVENT_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_EVENT_LIMIT) {
    throw new ConsoleRequestError(400, "INVALID_ARGUMENT", `limit: "${limitText}" is not a whole number from 1 to ${MAX_EVENT_LIMIT}`);
  }
  const since = time(query, "since");
  const until = time(query, "until");
  return { sandbox: query.get("sandbox") ?? "", type: query.get("type") ?? "", limit, ...(since !== undefined ? { since } : {}), ...(until !== undefined ? { until } : {}) };
}

/** The envelope a record holds, with its stream position as `seq` when the API sent one; undefined when it is no JSON object. */
export function eventOf(record: pb.EventRecord): ConsoleEvent | undefined {
  let doc: unknown;
  try {
    doc = JSON.parse(record.json);
  } catch {
    return undefined;
  }
  if (!doc || typeof doc !== "object" || Array.isArray(doc)) return undefined;
  const event = doc as ConsoleEvent;
  return typeof event["position"] === "number" ? { ...event, seq: event["position"] } : event;
}

/** The API watch's window for a query: from its `since` (a second early, for the clocks), else the API's default (0). */
export function sinceMs(query: Pick<EventQuery, "since">, now: number): number {
  return query.since === undefined ? 0 : Math.max(1, now - query.since + 1000);
}

/** Whether the event's time lies within the query's bounds (both inclusive). */
export function inWindow(event: ConsoleEvent, query: EventQuery): boolean {
  if (query.since === undefined && query.until === undefined) return true;
  const at = typeof event["time"] === "string" ? Date.parse(event["time"]) : NaN;
  if (Number.isNaN(at)) return false;
  return (query.since === undefined || at >= query.since) && (query.until === undefined || at <= query.until);
}

/** Keeps the last `limit` events pushed: newest last. */
export class LastEvents {
  private readonly items: ConsoleEvent[] = [];
  constructor(private readonly limit: number) {}
  push(event: ConsoleEvent): void {
    this.items.push(event);
    if (this.items.length > this.limit * 2) this.items.splice(0, this.items.length - this.limit);
  }
  list(): ConsoleEvent[] {
    return this.items.slice(-this.limit);
  }
}
