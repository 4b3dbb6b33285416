// The event store port: append with optimistic concurrency, read one aggregate, follow
// the log from a position, subscribe durably. Implemented in memory and on JetStream.

/** CloudEvents-shaped envelope of one event (see docs/events.md). */
export interface EventEnvelope {
  specversion: "1.0";
  id: string;
  type: string;
  source: string;
  /** The aggregate id, e.g. `team-a-feature-x`. */
  subject: string;
  time: string;
  datacontenttype: "application/json";
  data: unknown;
  correlationId: string;
  causationId: string;
  /** Who asked for it, when a person or tool did (the API call's client identity). */
  actor?: string;
  /** 1-based position of the event within its aggregate. */
  sequence: number;
}

export interface RecordedEvent extends EventEnvelope {
  /** Aggregate type, e.g. `sandbox`. */
  aggregate: string;
  /** Stream position of the commit that holds this event. */
  position: number;
}

/** Events appended together, atomically, to one aggregate: one message in the stream. */
export interface Commit {
  aggregate: string;
  aggregateId: string;
  position: number;
  events: RecordedEvent[];
}

export interface NewEvent {
  type: string;
  data: unknown;
  /** Optional event id (a ULID is minted otherwise). */
  id?: string;
}

export interface AppendMeta {
  source: string;
  correlationId?: string;
  causationId?: string;
  /** Deduplication key: a retried publish with the same id is dropped by the store. */
  commitId?: string;
  actor?: string;
  /**
   * The store's position the decision was made at: the append fails with ConcurrencyError
   * if any commit, of any aggregate, came after it. For a rule across aggregates (a plugin
   * version removed only while no sandbox uses it): nothing it read can have changed.
   */
  expectedPosition?: number;
}

/** What the writer believes the aggregate looks like: revision 0 means "must not exist". */
export interface Expected {
  /** Stream position of the aggregate's last commit (0: no commit yet). */
  revision: number;
  /** Number of events in the aggregate. */
  version: number;
}

export const NO_AGGREGATE: Expected = { revision: 0, version: 0 };

export interface AppendResult {
  revision: number;
  version: number;
  events: RecordedEvent[];
  /** True when the store recognised the commit id and dropped the publish. */
  duplicate: boolean;
}

export interface AggregateEvents extends Expected {
  events: RecordedEvent[];
}

/**
 * A durable subscription's handler may answer that it wants the commit again later, not now:
 * the commit is delivered again (to this or another subscription of the durable) after
 * `againInMs`, while the others flow, and is not a failure (nothing is logged, and no dead
 * letter comes of it; the delivery counts towards maxDeliver, as every one does). A follow
 * subscription ignores the answer.
 */
export interface DeliverAgain {
  againInMs: number;
}

export type CommitHandler = (commit: Commit) => Promise<void | DeliverAgain> | void | DeliverAgain;

export interface Subscription {
  /** Resolves once the commits that existed when the subscription began are delivered. */
  readonly caughtUp: Promise<void>;
  stop(): Promise<void>;
}

export interface FollowOptions {
  /** Deliver commits after this position (0: from the beginning). */
  from?: number;
  /**
   * Without `from`: deliver the commits stored at or after this time, found by the store
   * (JetStream's start-time delivery), not by reading the commits before it.
   */
  since?: Date;
  /** Only this aggregate type. */
  aggregate?: string;
}

export interface DurableOptions extends FollowOptions {
  /**
   * Consumer name. A second subscription under the same name resumes where the first
   * acknowledged; two at once share the commits (each goes to one of them).
   */
  durable: string;
  /** How redelivery of a failing commit is bounded; see RedeliveryPolicy. */
  redelivery?: Partial<RedeliveryPolicy>;
}

/**
 * What happens to a commit whose handler throws: a retryable error (isRetryable) is
 * delivered again after `backoffMs[deliveries - 1]` (the last value repeats), at most
 * `maxDeliver` times in all; a non-retryable error, or the last failed delivery, makes it
 * a dead letter: recorded as an event and never delivered again. Either way the commits
 * after it are not held up.
 */
export interface RedeliveryPolicy {
  /** `Infinity`: a retryable error is retried for as long as it lasts (for handlers that are safe to repeat and must not give up, like the outbox). */
  maxDeliver: number;
  backoffMs: number[];
}

export const DEFAULT_REDELIVERY: RedeliveryPolicy = { maxDeliver: 8, backoffMs: [100, 500, 1000, 2000, 5000, 10_000] };

export function redeliveryPolicy(p: Partial<RedeliveryPolicy> | undefined): RedeliveryPolicy {
  return { ...DEFAULT_REDELIVERY, ...p };
}

/** The delay before delivery `deliveries + 1` of a commit that failed `deliveries` times. */
export function backoffFor(policy: RedeliveryPolicy, deliveries: number): number {
  const b = policy.backoffMs;
  return b[Math.min(Math.max(deliveries - 1, 0), b.length - 1)] ?? 1000;
}

/** The aggregate dead letters are recorded on: `deadletter.<consumer>.<position>`. */
export const DEAD_LETTER_AGGREGATE = "deadletter";
export const DEAD_LETTER_TYPE = "ephemera.deadletter.recorded.v1";

/** The data of a dead-letter event (see docs/events.md). */
export interface DeadLetter {
  consumer: string;
  /** What could not be handled: an event commit (aggregate, id, position) or a work item. */
  aggregate: string;
  aggregateId: string;
  position: number;
  types: string[];
  deliveries: number;
  retryable: boolean;
  reason: string;
}

export interface EventStore {
  /** Deduplication horizon: a commit id seen less than this long ago is dropped. */
  readonly duplicateWindowMs: number;
  append(aggregate: string, id: string, expected: Expected, events: NewEvent[], meta: AppendMeta): Promise<AppendResult>;
  read(aggregate: string, id: string): Promise<AggregateEvents>;
  /** Position of the newest commit (0 when empty). */
  position(): Promise<number>;
  /** Every commit after `from`, then new ones as they arrive; at most once, in order. */
  follow(options: FollowOptions, handler: CommitHandler): Subscription;
  /** Every commit after the durable's acknowledged position; a commit whose handler throws is delivered again. */
  subscribe(options: DurableOptions, handler: CommitHandler): Subscription;
  close(): Promise<void>;
}
