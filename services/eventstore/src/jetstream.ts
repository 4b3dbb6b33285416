// The event store on NATS JetStream: appends and reads of aggregates.
// One message per commit on `<prefix>.ev.<aggregate>.<id>`; optimistic concurrency through
// Nats-Expected-Last-Subject-Sequence (and Nats-Expected-Last-Sequence for a decision made
// at a stream position), deduplication through Nats-Msg-Id. An aggregate is
// read with message gets (STREAM.MSG.GET: its last commit, then any missing commits after
// what this handle already holds), never with a consumer.
// Following and subscribing are follow.ts's and subscribe.ts's.
import type { NatsConnection } from "@nats-io/nats-core";
import { InvalidArgumentError, headers as natsHeaders } from "@nats-io/nats-core";
import {
  JetStreamApiError, StorageType, jetstream, jetstreamManager,
  type JetStreamClient, type JetStreamManager, type MsgRequest, type StoredMsg,
} from "@nats-io/jetstream";
import { ConcurrencyError, TooLargeError, UnavailableError, errorMessage, ulidGen, type Logger } from "@ephemera/kit";
import type { Registry } from "@ephemera/kit/metrics";
import { AggregateCache, type AggregateCacheOptions, type CachedAggregate } from "./aggregates.js";
import { decodeCommit, type StoredEvent } from "./commits.js";
import { ensureStream } from "./durables.js";
import { envelopes, storedForm } from "./envelope.js";
import { followCommits } from "./follow.js";
import { natsHealth, type NatsHealth } from "./health.js";
import { appendMetrics, appendOutcome, type AppendMetrics } from "./metrics.js";
import { subscribeCommits } from "./subscribe.js";
import type {
  AggregateEvents, AppendMeta, AppendResult, CommitHandler, DurableOptions, EventStore, Expected,
  FollowOptions, NewEvent, Subscription,
} from "./types.js";

const WRONG_LAST_SEQUENCE = 10071;
const NO_MESSAGE_FOUND = 10037;

export interface JetStreamStoreOptions {
  prefix: string;
  replicas?: number;
  logger?: Logger;
  /** Where append latency and conflicts are counted (the service's registry); absent: not counted. */
  metrics?: Registry;
  now?: () => Date;
  /** Deduplication window of a stream this store creates (default 2 minutes). */
  duplicateWindowMs?: number;
  /**
   * Bounds on the aggregates this handle keeps after reading or appending them, so that
   * reading one again costs a single request when it has not changed (default 10,000
   * aggregates, 64 MiB of stored commits).
   */
  cache?: AggregateCacheOptions;
}

const NANOS_PER_MS = 1_000_000;

export const eventSubject = (prefix: string, aggregate: string, id: string) => `${prefix}.ev.${aggregate}.${id}`;
export const eventStreamName = (prefix: string) => `${prefix}_events`;

export class JetStreamEventStore implements EventStore {
  private readonly stream: string;
  private readonly newId = ulidGen();
  private follows = 0;
  private readonly now: () => Date;
  readonly duplicateWindowMs: number;
  /** The connection's health, with this store's subscriptions in it: what a service's gRPC health follows. */
  readonly health: NatsHealth;
  private readonly cache: AggregateCache;
  private readonly metrics?: AppendMetrics;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly options: JetStreamStoreOptions,
  ) {
    this.stream = eventStreamName(options.prefix);
    this.now = options.now ?? (() => new Date());
    this.duplicateWindowMs = options.duplicateWindowMs ?? 2 * 60_000;
    this.health = natsHealth(nc, options.logger);
    this.cache = new AggregateCache(options.cache);
    if (options.metrics) this.metrics = appendMetrics(options.metrics);
  }

  /** Opens the store, creating the events stream if it does not exist (or bringing its limits to the declared ones). */
  static async open(nc: NatsConnection, options: JetStreamStoreOptions): Promise<JetStreamEventStore> {
    const jsm = await jetstreamManager(nc, { timeout: 10_000 });
    await ensureStream(jsm, {
      config: {
        name: eventStreamName(options.prefix),
        subjects: [`${options.prefix}.ev.>`],
        storage: StorageType.File,
        num_replicas: options.replicas ?? 1,
        duplicate_window: (options.duplicateWindowMs ?? 2 * 60_000) * NANOS_PER_MS,
      },
      // Moving a stream between replica counts is an operator's step (nats stream edit), not a start's.
      createOnly: ["num_replicas"],
    }, options.logger);
    return new JetStreamEventStore(nc, jetstream(nc, { timeout: 10_000 }), jsm, options);
  }

  async append(aggregate: string, id: string, expected: Expected, events: NewEvent[], meta: AppendMeta): Promise<AppendResult> {
    const started = performance.now();
    try {
      const result = await this.publishCommit(aggregate, id, expected, events, meta);
      this.metrics?.appended(aggregate, result.duplicate ? "duplicate" : "ok", started);
      return result;
    } catch (err) {
      this.metrics?.appended(aggregate, appendOutcome(err), started);
      throw err;
    }
  }

  private async publishCommit(aggregate: string, id: string, expected: Expected, events: NewEvent[], meta: AppendMeta): Promise<AppendResult> {
    const subject = eventSubject(this.options.prefix, aggregate, id);
    // The position is only known after the publish; envelopes store it implicitly (the message seq).
    const recorded = envelopes(events, meta, {
      aggregate, aggregateId: id, firstSequence: expected.version + 1, position: 0, now: this.now, newId: this.newId,
    });
    const payload = JSON.stringify(recorded.map(storedForm));
    const h = natsHeaders();
    h.set("Ephemera-Types", events.map((e) => e.type).join(","));
    try {
      const ack = await this.js.publish(subject, payload, {
        headers: h,
        msgID: meta.commitId ?? recorded[0]?.id ?? this.newId(),
        expect: { lastSubjectSequence: expected.revision, ...(meta.expectedPosition !== undefined ? { lastSequence: meta.expectedPosition } : {}) },
      });
      if (ack.duplicate) {
        this.cache.delete(subject);
        const { events: all, revision, version } = await this.read(aggregate, id);
        const mine = all.filter((e) => e.position === ack.seq);
        return { revision, version, events: mine, duplicate: true };
      }
      for (const e of recorded) e.position = ack.seq;
      this.extend(subject, aggregate, id, expected, ack.seq, payload);
      return { revision: ack.seq, version: expected.version + events.length, events: recorded, duplicate: false };
    } catch (err) {
      if (err instanceof JetStreamApiError && err.code === WRONG_LAST_SEQUENCE) {
        this.cache.delete(subject);
        throw new ConcurrencyError(subject, expected.revision, { cause: err });
      }
      // Too large for the server is not a blip: retrying cannot help, and the caller must hear why.
      if (err instanceof InvalidArgumentError && /max_payload/.test(err.message)) {
        const size = Buffer.byteLength(payload);
        this.options.logger?.warn({ subject, size, types: events.map((e) => e.type) }, "append refused: over the server's max_payload");
        throw new TooLargeError(`the commit to ${subject} is ${size} bytes, over the server's max_payload of ${this.nc.info?.max_payload ?? "?"} bytes`, { cause: err });
      }
      this.options.logger?.warn({ err, subject }, "append failed");
      throw new UnavailableError(`append to ${subject} failed: ${errorMessage(err)}`, { cause: err });
    }
  }

  /**
   * One request for the subject's last commit, which is all it costs when this handle holds
   * the aggregate up to that commit or the one before; otherwise one more per other commit
   * it does not hold yet. What is held is never returned without asking for the last
   * commit, so a read is never stale.
   */
  async read(aggregate: string, id: string): Promise<AggregateEvents> {
    const subject = eventSubject(this.options.prefix, aggregate, id);
    const last = await this.getMessage(subject, { last_by_subj: subject });
    if (!last) {
      this.cache.delete(subject);
      return { events: [], revision: 0, version: 0 };
    }
    const kept = this.cache.get(subject);
    if (kept?.revision === last.seq) return aggregateEvents(kept);
    const read = await this.readAfter(aggregate, id, subject, kept && kept.revision < last.seq ? kept : undefined, last);
    this.cache.set(subject, read);
    return aggregateEvents(read);
  }

  /**
   * `from` and the commits after it up to `last`, one request each, never a consumer. Event
   * sequences run on without a gap from one commit of an aggregate to the next (every
   * append's expected version comes from a read or an append), so `last` starting right
   * after the events in hand is the next commit, and nothing before it needs asking for.
   */
  private async readAfter(aggregate: string, id: string, subject: string, from: CachedAggregate | undefined, last: StoredMsg): Promise<CachedAggregate> {
    const lastCommit = decodeCommit(aggregate, id, last.seq, last.json<StoredEvent[]>());
    const events = from ? [...from.events] : [];
    let bytes = from?.bytes ?? 0;
    let revision = from?.revision ?? 0;
    while (revision < last.seq) {
      const version = events.at(-1)?.sequence ?? 0;
      let commit = lastCommit;
      let size = last.data.length;
      if (revision + 1 !== last.seq && lastCommit.events[0]?.sequence !== version + 1) {
        // next_by_subj (2.9 has it; the client's type names only seq and last_by_subj):
        // the subject's first message at or after seq.
        const m = await this.getMessage(subject, { seq: revision + 1, next_by_subj: subject } as MsgRequest);
        if (!m) throw new UnavailableError(`read of ${subject} failed: its commits were removed while it was read`);
        commit = m.seq === last.seq ? lastCommit : decodeCommit(aggregate, id, m.seq, m.json<StoredEvent[]>());
        size = m.data.length;
      }
      // What was held must end where the stored commits go on; if not (the subject was
      // purged and written again), read it all. ephemera never purges an event subject; a
      // rewrite whose last commit happened to follow the held sequences would go unseen.
      if (from && revision === from.revision && (commit.events[0]?.sequence ?? version + 1) !== version + 1) {
        return this.readAfter(aggregate, id, subject, undefined, last);
      }
      events.push(...commit.events);
      bytes += size;
      revision = commit.position;
    }
    return { revision, version: events.at(-1)?.sequence ?? 0, events, bytes };
  }

  /** A commit this handle made right after what it holds: held too, so the next read is one request. */
  private extend(subject: string, aggregate: string, id: string, expected: Expected, position: number, payload: string): void {
    const kept = this.cache.get(subject);
    const base = expected.revision === 0 ? { events: [], bytes: 0 } : kept?.revision === expected.revision ? kept : undefined;
    if (!base) return;
    // From the stored form, as a read would return it (not the caller's objects).
    const mine = decodeCommit(aggregate, id, position, JSON.parse(payload) as StoredEvent[]).events;
    const events = [...base.events, ...mine];
    this.cache.set(subject, { revision: position, version: events.at(-1)?.sequence ?? 0, events, bytes: base.bytes + Buffer.byteLength(payload) });
  }

  private async getMessage(subject: string, query: MsgRequest): Promise<StoredMsg | null> {
    try {
      return await this.jsm.streams.getMessage(this.stream, query);
    } catch (err) {
      if (err instanceof JetStreamApiError && err.code === NO_MESSAGE_FOUND) return null;
      throw new UnavailableError(`read of ${subject} failed: ${errorMessage(err)}`, { cause: err });
    }
  }

  async position(): Promise<number> {
    return (await this.jsm.streams.info(this.stream)).state.last_seq;
  }

  follow(options: FollowOptions, handler: CommitHandler): Subscription {
    return followCommits({
      js: this.js, stream: this.stream, filter: this.filter(options), name: `follow ${options.aggregate ?? "*"} #${++this.follows}`,
      health: this.health, ...(this.options.logger ? { logger: this.options.logger } : {}),
    }, options, handler);
  }

  subscribe(options: DurableOptions, handler: CommitHandler): Subscription {
    return subscribeCommits({
      js: this.js, jsm: this.jsm, stream: this.stream, prefix: this.options.prefix, filter: this.filter(options),
      health: this.health, store: this, ...(this.options.logger ? { logger: this.options.logger } : {}),
    }, options, handler);
  }

  async close(): Promise<void> {
    // The connection belongs to the caller.
  }

  private filter(options: FollowOptions): string {
    return options.aggregate ? `${this.options.prefix}.ev.${options.aggregate}.>` : `${this.options.prefix}.ev.>`;
  }
}

/** A copy of the list: a caller changing what it got cannot change what is held. */
const aggregateEvents = (a: CachedAggregate): AggregateEvents => ({ events: [...a.events], revision: a.revision, version: a.version });
