// The event store on NATS JetStream. One message per commit on
// `<prefix>.ev.<aggregate>.<id>`; optimistic concurrency through
// Nats-Expected-Last-Subject-Sequence, deduplication through Nats-Msg-Id. An aggregate is
// read with message gets (STREAM.MSG.GET: its last commit, then any missing commits after
// what this handle already holds), never with a consumer.
import { connect } from "@nats-io/transport-node";
import type { NatsConnection } from "@nats-io/nats-core";
import {
  InvalidArgumentError, credsAuthenticator, headers as natsHeaders, nkeyAuthenticator, type ConnectionOptions,
} from "@nats-io/nats-core";
import {
  AckPolicy, DeliverPolicy, JetStreamApiError, ReplayPolicy, StorageType, jetstream, jetstreamManager,
  type ConsumerMessages, type JetStreamClient, type JetStreamManager, type JsMsg, type MsgRequest, type StoredMsg,
} from "@nats-io/jetstream";
import { readFileSync } from "node:fs";
import {
  ConcurrencyError, TooLargeError, UnavailableError, delay, errorMessage, isRetryable, redactUrl, ulidGen, type Logger, type NatsAuth,
} from "@ephemera/kit";
import { deadLetter, recordDeadLetter } from "./deadletter.js";
import { ensureConsumer, ensureStream } from "./durables.js";
import { envelopes, storedForm } from "./envelope.js";
import { AggregateCache, type AggregateCacheOptions, type CachedAggregate } from "./aggregates.js";
import { appendMetrics, appendOutcome, type AppendMetrics } from "./metrics.js";
import type { Registry } from "@ephemera/kit/metrics";
import type {
  AggregateEvents, AppendMeta, AppendResult, Commit, CommitHandler, DurableOptions, EventStore, Expected,
  FollowOptions, NewEvent, RecordedEvent, RedeliveryPolicy, Subscription,
} from "./types.js";
import { backoffFor, redeliveryPolicy } from "./types.js";

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

export async function connectNats(url: string, name: string, auth?: NatsAuth): Promise<NatsConnection> {
  const credentials = natsCredentials(auth);
  try {
    // Reconnects for ever (a server paused or restarted for any length of time): the
    // connection only closes when the service drains it on shutdown.
    return await connect({ servers: url, name, maxReconnectAttempts: -1, reconnectTimeWait: 500, waitOnFirstConnect: false, ...credentials });
  } catch (err) {
    // The cause names the server's refusal ("Authorization Violation"), never the credentials.
    throw new UnavailableError(`cannot connect to NATS at ${redactUrl(url)}${auth ? ` (as ${describeNatsAuth(auth)})` : ""}: ${errorMessage(err)}`, { cause: err });
  }
}

/** The connection options of a way of authenticating; a seed or creds file is read once, here. */
function natsCredentials(auth: NatsAuth | undefined): Partial<ConnectionOptions> {
  if (!auth) return {};
  const file = (path: string, what: string) => {
    try {
      return readFileSync(path);
    } catch (err) {
      throw new Error(`${what} ${path} cannot be read: ${(err as NodeJS.ErrnoException).code ?? errorMessage(err)}`, { cause: err });
    }
  };
  switch (auth.kind) {
    case "user": return { user: auth.user, pass: auth.pass };
    case "token": return { token: auth.token };
    case "nkey": return { authenticator: nkeyAuthenticator(new TextEncoder().encode(file(auth.seedFile, "NATS_NKEY").toString("utf8").trim())) };
    case "creds": return { authenticator: credsAuthenticator(new Uint8Array(file(auth.credsFile, "NATS_CREDS"))) };
  }
}

const describeNatsAuth = (auth: NatsAuth) =>
  auth.kind === "user" ? `user ${auth.user}` : auth.kind === "token" ? "a token" : auth.kind === "nkey" ? `the nkey in ${auth.seedFile}` : `the credentials in ${auth.credsFile}`;

const JS_API_INFO = "$JS.API.INFO";
const healthOf = new WeakMap<NatsConnection, NatsHealth>();

/** The one NatsHealth of a connection (created with the first caller's logger). */
export function natsHealth(nc: NatsConnection, logger?: Logger): NatsHealth {
  let h = healthOf.get(nc);
  if (!h) healthOf.set(nc, (h = new NatsHealth(nc, logger)));
  return h;
}

/**
 * Whether a NATS connection, and the consumers reading through it, work right now: a
 * JetStream API request with a deadline notices a server that stopped answering (paused,
 * or gone without closing the socket), the connection's status a dropped connection, and each
 * consumer loop says while it is re-creating itself. Logged once per change, not per retry.
 */
export class NatsHealth {
  private connected = true;
  private reported = true;
  private probing = false;
  private readonly interrupted = new Map<string, unknown>();
  private readonly listeners = new Set<(healthy: boolean) => void>();

  constructor(private readonly nc: NatsConnection, private readonly logger?: Logger, probeMs = 500, probeTimeoutMs = 1000) {
    const timer = setInterval(() => void this.probe(probeTimeoutMs), probeMs);
    timer.unref();
    void nc.closed().then(() => clearInterval(timer), () => clearInterval(timer));
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === "disconnect" || s.type === "staleConnection") this.setConnected(false, s.type);
        // "reconnect": the next probe says whether the server answers again.
      }
    })().catch(() => undefined);
  }

  get healthy(): boolean {
    return this.connected && this.interrupted.size === 0;
  }

  onChange(listener: (healthy: boolean) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** A consumer, fetch loop or watch lost its messages and is re-creating itself. */
  interrupt(name: string, err: unknown): void {
    if (!this.interrupted.has(name)) this.logger?.warn({ err, consumer: name }, "NATS consumer interrupted; re-creating it with backoff");
    this.interrupted.set(name, err);
    this.changed();
  }

  /** It reads again. */
  restore(name: string): void {
    if (!this.interrupted.delete(name)) return;
    this.logger?.info({ consumer: name }, "NATS consumer reading again");
    this.changed();
  }

  /** It stopped: no longer counted. */
  forget(name: string): void {
    if (this.interrupted.delete(name)) this.changed();
  }

  private async probe(timeoutMs: number): Promise<void> {
    if (this.probing || this.nc.isClosed()) return;
    this.probing = true;
    try {
      // JetStream's own API, not only the server: after a restart it answers a while after the socket.
      const reply = await this.nc.request(JS_API_INFO, undefined, { timeout: timeoutMs });
      const error = (reply.json<{ error?: { description?: string } }>()).error;
      if (error) throw new Error(`JetStream: ${error.description ?? "unavailable"}`);
      this.setConnected(true);
    } catch (err) {
      this.setConnected(false, err);
    } finally {
      this.probing = false;
    }
  }

  private setConnected(connected: boolean, reason?: unknown): void {
    if (connected === this.connected) return;
    this.connected = connected;
    if (connected) this.logger?.info({ server: this.nc.getServer() }, "NATS answers again");
    else this.logger?.warn({ reason: reason instanceof Error ? reason.message : reason, server: this.nc.getServer() }, "NATS unavailable; riding it out");
    this.changed();
  }

  private changed(): void {
    const healthy = this.healthy;
    if (healthy === this.reported) return;
    this.reported = healthy;
    for (const l of this.listeners) l(healthy);
  }
}

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
        expect: { lastSubjectSequence: expected.revision },
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
    return this.run(options, handler, async (after) =>
      this.js.consumers.get(this.stream, {
        filter_subjects: this.filter(options),
        ...(after ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: after + 1 } : {}),
      }));
  }

  subscribe(options: DurableOptions, handler: CommitHandler): Subscription {
    const name = `${this.options.prefix}_${options.durable}`;
    const policy = redeliveryPolicy(options.redelivery);
    return this.run(options, handler, async () => {
      await ensureConsumer(this.jsm, this.stream, {
        config: {
          durable_name: name,
          ack_policy: AckPolicy.Explicit,
          ack_wait: 30 * 1_000_000_000,
          // The server's own bound, for a handler that hangs past ack_wait every time; room is
          // left above ours for the deliveries that retry recording a dead letter.
          max_deliver: Number.isFinite(policy.maxDeliver) ? policy.maxDeliver * 2 : -1,
          filter_subject: this.filter(options),
          replay_policy: ReplayPolicy.Instant,
        },
        start: options.from
          ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: options.from + 1 }
          : { deliver_policy: DeliverPolicy.All },
        position: "ack-floor",
      }, this.options.logger);
      return this.js.consumers.get(this.stream, name);
    }, { durable: options.durable, policy });
  }

  async close(): Promise<void> {
    // The connection belongs to the caller.
  }

  private filter(options: FollowOptions): string {
    return options.aggregate ? `${this.options.prefix}.ev.${options.aggregate}.>` : `${this.options.prefix}.ev.>`;
  }

  /** A failed delivery: again later (nak with backoff), or a dead letter (recorded, then term). */
  private async failed(durable: { durable: string; policy: RedeliveryPolicy }, commit: Commit, m: JsMsg, err: unknown): Promise<void> {
    const deliveries = m.info.deliveryCount;
    const log = this.options.logger;
    if (isRetryable(err) && deliveries < durable.policy.maxDeliver) {
      const delayMs = backoffFor(durable.policy, deliveries);
      log?.warn({ err, consumer: durable.durable, subject: m.subject, seq: m.seq, deliveries, delayMs }, "commit handler failed; will redeliver");
      m.nak(delayMs);
      return;
    }
    const letter = deadLetter(durable.durable, {
      aggregate: commit.aggregate, aggregateId: commit.aggregateId, position: commit.position, types: commit.events.map((e) => e.type),
    }, deliveries, err);
    try {
      await recordDeadLetter(this, letter);
    } catch (recordErr) {
      // Not recorded: keep the commit (delivered again later) rather than lose it silently.
      log?.error({ err: recordErr, consumer: durable.durable, seq: m.seq }, "cannot record a dead letter; will redeliver");
      m.nak(backoffFor(durable.policy, deliveries));
      return;
    }
    log?.error({ err, consumer: durable.durable, subject: m.subject, seq: m.seq, deliveries }, "commit handler gave up; recorded as a dead letter");
    m.term();
  }

  private decode(m: JsMsg): Commit {
    const tokens = m.subject.split(".");
    return decodeCommit(tokens[2]!, tokens.slice(3).join("."), m.seq, m.json<StoredEvent[]>());
  }

  private run(
    options: FollowOptions,
    handler: CommitHandler,
    open: (after: number) => Promise<{ consume(o?: object): Promise<ConsumerMessages>; info(cached?: boolean): Promise<{ num_pending: number; num_ack_pending: number }> }>,
    durable?: { durable: string; policy: RedeliveryPolicy },
  ): Subscription {
    let messages: ConsumerMessages | undefined;
    let stopped = false;
    let opened = false;
    /** The last commit handled: a consumer reopened after a server restart resumes after it. */
    let last = options.from ?? 0;
    let markCaughtUp!: () => void;
    let fail!: (e: unknown) => void;
    const caughtUp = new Promise<void>((resolve, reject) => { markCaughtUp = resolve; fail = reject; });
    caughtUp.catch(() => undefined);
    const name = durable ? `subscription ${durable.durable}` : `follow ${options.aggregate ?? "*"} #${++this.follows}`;
    const loop = (async () => {
      // A consumer's messages end when the server restarts or the connection drops for long:
      // open it again (with backoff) until stopped. Only a failure to open it the first time is final.
      for (let failures = 0; !stopped; ) {
        try {
          const consumer = await open(last);
          const info = await consumer.info(true);
          if (info.num_pending === 0 && info.num_ack_pending === 0) markCaughtUp();
          messages = await consumer.consume({ max_messages: 256 });
          opened = true;
          if (stopped) {
            // Stopped while opening: close() of an iterator never read does not resolve, so don't wait for it.
            void messages.close().catch(() => undefined);
            return;
          }
          this.health.restore(name);
          failures = 0;
          for await (const m of messages) {
            // Buffered messages are left unacknowledged on stop: a durable redelivers them.
            if (stopped) break;
            const commit = this.decode(m);
            try {
              await handler(commit);
              if (durable) m.ack();
            } catch (err) {
              if (durable) await this.failed(durable, commit, m, err);
              else this.options.logger?.error({ err, subject: m.subject, seq: m.seq }, "commit handler failed; skipped");
            }
            last = Math.max(last, m.seq);
            if (m.info.pending === 0) markCaughtUp();
          }
          if (stopped) return;
          this.health.interrupt(name, new Error("the consumer's messages ended"));
        } catch (err) {
          if (stopped) return;
          if (!opened && failures >= 5) {
            this.options.logger?.error({ err, options }, "subscription ended");
            fail(err);
            return;
          }
          this.health.interrupt(name, err);
        }
        failures++;
        await delay(Math.min(5000, 250 * 2 ** Math.min(failures, 5)));
      }
    })().finally(() => this.health.forget(name));
    return {
      caughtUp,
      stop: async () => {
        stopped = true;
        const opened = messages;
        if (opened) await opened.close();
        await loop;
      },
    };
  }
}

type StoredEvent = Omit<RecordedEvent, "aggregate" | "position">;

function decodeCommit(aggregate: string, aggregateId: string, position: number, stored: StoredEvent[]): Commit {
  return { aggregate, aggregateId, position, events: stored.map((e) => ({ ...e, aggregate, position })) };
}

/** A copy of the list: a caller changing what it got cannot change what is held. */
const aggregateEvents = (a: CachedAggregate): AggregateEvents => ({ events: [...a.events], revision: a.revision, version: a.version });
