// Step logs on JetStream: `<prefix>.log.<runId>`, chunks appended while the step runs and
// an end record once it is over, kept for a retention period (7 days by default). Written
// by the runner, read and followed by the sandbox service for `eph logs`. The in-memory
// twin passes the same contract (logs-contract.testkit.ts).
import type { NatsConnection } from "@nats-io/nats-core";
import { headers as natsHeaders } from "@nats-io/nats-core";
import {
  DeliverPolicy, JetStreamApiError, StorageType, jetstream, jetstreamManager,
  type ConsumerMessages, type JetStreamClient, type JetStreamManager,
} from "@nats-io/jetstream";
import { EphemeraError, UnavailableError, ValidationError, type Logger } from "@ephemera/kit";
import { ensureStream } from "./durables.js";
import { ConsumerLoop } from "./reopen.js";
import { readSubject } from "./subject.js";

/** One stored piece of a run's log. */
export interface LogEntry {
  data: Buffer;
  /** When it was stored (ms since the epoch, the store's clock). */
  time: number;
}

export interface AppendOptions {
  /**
   * The chunk's byte offset in the run's log. An append repeated at the same offset (a
   * retried flush) is stored once, within the store's deduplication window (2 minutes).
   */
  offset?: number;
}

export interface ReadOptions {
  /** Only entries stored at or after this time (ms since the epoch). */
  since?: number;
}

/** Why a follower ended: the log's end was read, drain() reached what was stored, or stop(). */
export type FollowEnd = "ended" | "drained" | "stopped";

export interface LogFollower {
  /** Settles once the follower ends; rejects with UnavailableError when it cannot read, ValidationError for a bad run id. */
  readonly done: Promise<FollowEnd>;
  /**
   * Ends the follower once it has delivered what is stored now: for a run known to be over
   * whose end record was never written (its runner died).
   */
  drain(): void;
  /** Ends the follower; nothing is delivered once this resolves. */
  stop(): Promise<void>;
}

/**
 * Every method rejects with ValidationError for a run id that is not literal, and with
 * UnavailableError while the backend cannot answer: a log is never reported empty because
 * it could not be read.
 */
export interface LogStore {
  /** Appends to the run's log; concurrent appends to one run each land whole, in call order. */
  append(runId: string, chunk: Uint8Array, options?: AppendOptions): Promise<void>;
  /** Marks the run's log complete: followers end once they have delivered what came before. Idempotent. */
  end(runId: string): Promise<void>;
  /** The run's whole log; empty for a run that has none. */
  read(runId: string): Promise<Buffer>;
  /** The run's log as stored, piece by piece, with the time of each. */
  entries(runId: string, options?: ReadOptions): Promise<LogEntry[]>;
  /**
   * Delivers the run's stored entries, then each new one as it is appended, in order and
   * once each, until the log's end is read, drain() or stop(). Survives a backend that goes
   * away after the follower started; one that is away at the start rejects `done`.
   */
  follow(runId: string, options: ReadOptions, onEntry: (entry: LogEntry) => void): LogFollower;
}

const CHUNK = 64 * 1024;
export const DEFAULT_LOG_RETENTION_MS = 7 * 24 * 3_600_000;
const DUPLICATE_WINDOW_MS = 2 * 60_000;
/** Header of the record that ends a run's log. */
const END_HEADER = "Ephemera-Log-End";
const NANOS_PER_MS = 1_000_000;
const NO_MESSAGE_FOUND = 10037;

export const logStreamName = (prefix: string) => `${prefix}_logs`;

// A run id becomes subject tokens: a wildcard, a space or an empty token would make a
// read span other runs' logs (a read of `rk.*` returned every run of the sandbox).
const LITERAL_ID = /^[^.\s*>]+(\.[^.\s*>]+)*$/;

function checkRunId(runId: string): void {
  if (LITERAL_ID.test(runId)) return;
  throw new ValidationError([{
    field: "run_id", rule: "run-id", description: `"${runId}" is not a literal run id (dot-separated tokens without spaces, "*" or ">")`,
  }], "invalid run id");
}

export interface LogStoreOptions {
  /**
   * How long a run's log is kept (the stream's max age). Given, it is applied to the
   * stream, created or existing; absent, a new stream gets 7 days and an existing one is
   * left as it is (only the service configured to own it sets it).
   */
  retentionMs?: number;
  /** Deadline of each JetStream request, so a call fails instead of waiting for a lost server. */
  timeoutMs?: number;
  /** Replicas of the stream when this creates it (EPHEMERA_STREAM_REPLICAS). */
  replicas?: number;
  /** Where a change of the stream's config is told. */
  logger?: Logger;
}

export class JetStreamLogStore implements LogStore {
  /** The last append of each run still in flight: the next one starts after it. */
  private readonly tails = new Map<string, Promise<void>>();
  private readonly stream: string;

  private constructor(
    private readonly js: JetStreamClient, private readonly jsm: JetStreamManager, private readonly prefix: string,
    private readonly timeoutMs: number,
  ) {
    this.stream = logStreamName(prefix);
  }

  static async open(nc: NatsConnection, prefix: string, { retentionMs, timeoutMs = 10_000, replicas = 1, logger }: LogStoreOptions = {}): Promise<JetStreamLogStore> {
    if (retentionMs !== undefined && !(Number.isInteger(retentionMs) && retentionMs >= 1000)) {
      throw new RangeError(`the log retention must be a whole number of milliseconds, at least 1 s; got ${retentionMs}`);
    }
    const jsm = await jetstreamManager(nc, { timeout: timeoutMs });
    const name = logStreamName(prefix);
    const maxAge = (retentionMs ?? DEFAULT_LOG_RETENTION_MS) * NANOS_PER_MS;
    // The server refuses a deduplication window longer than the max age.
    const duplicateWindow = Math.min(DUPLICATE_WINDOW_MS * NANOS_PER_MS, maxAge);
    await ensureStream(jsm, {
      config: { name, subjects: [`${prefix}.log.>`], storage: StorageType.File, max_age: maxAge, duplicate_window: duplicateWindow, num_replicas: replicas },
      // Without a retention set, an existing stream keeps the one it has.
      createOnly: retentionMs === undefined ? ["num_replicas", "max_age", "duplicate_window"] : ["num_replicas"],
    }, logger);
    return new JetStreamLogStore(jetstream(nc, { timeout: timeoutMs }), jsm, prefix, timeoutMs);
  }

  /** The stream's max age now, in ms. */
  async retentionMs(): Promise<number> {
    return (await this.jsm.streams.info(this.stream)).config.max_age / NANOS_PER_MS;
  }

  async append(runId: string, data: Uint8Array, options: AppendOptions = {}): Promise<void> {
    checkRunId(runId);
    await this.inOrder(runId, () => this.publish(runId, data, options.offset));
  }

  async end(runId: string): Promise<void> {
    checkRunId(runId);
    const h = natsHeaders();
    h.set(END_HEADER, "1");
    await this.inOrder(runId, () => unavailableOn(`end the log of ${runId}`, () =>
      this.js.publish(this.subject(runId), new Uint8Array(0), { headers: h, msgID: `${runId}@end` })).then(() => undefined));
  }

  async read(runId: string): Promise<Buffer> {
    return Buffer.concat((await this.entries(runId)).map((e) => e.data));
  }

  async entries(runId: string, { since = 0 }: ReadOptions = {}): Promise<LogEntry[]> {
    checkRunId(runId);
    const { messages } = await unavailableOn(`read the log of ${runId}`, () => readSubject(this.js, this.jsm, this.stream, this.subject(runId)));
    return messages
      .filter((m) => m.data.length > 0 && m.time.getTime() >= since)
      .map((m) => ({ data: Buffer.from(m.data), time: m.time.getTime() }));
  }

  follow(runId: string, { since = 0 }: ReadOptions, onEntry: (entry: LogEntry) => void): LogFollower {
    let settle!: (end: FollowEnd | Error) => void;
    let settled = false;
    let messages: ConsumerMessages | undefined;
    /** The stream position of the last message seen: a consumer opened again resumes after it. */
    let last = 0;
    let drainTo: number | undefined;
    const done = new Promise<FollowEnd>((resolve, reject) => {
      settle = (end) => {
        if (settled) return;
        settled = true;
        loop.stop();
        // close() of an iterator never read does not resolve: never wait for it.
        void messages?.close().catch(() => undefined);
        if (end instanceof Error) reject(end); else resolve(end);
      };
    });
    done.catch(() => undefined);
    const drained = () => drainTo !== undefined && last >= drainTo;
    // Only a follower that never read gives up on a failure: one that did resumes where it was.
    const loop = new ConsumerLoop({
      name: `log of ${runId}`, final: (err, { opened }) => err instanceof EphemeraError || !opened,
    }, async (loop) => {
      checkRunId(runId);
      const consumer = await this.js.consumers.get(this.stream, {
        filter_subjects: this.subject(runId),
        ...(last ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: last + 1 } : {}),
      });
      messages = await consumer.consume();
      if (loop.stopping) {
        void messages.close().catch(() => undefined);
        return;
      }
      loop.reading();
      if (drained()) return settle("drained");
      for await (const m of messages) {
        if (loop.stopping) return;
        last = m.seq;
        if (m.headers?.has(END_HEADER)) return settle("ended");
        if (m.data.length > 0 && m.time.getTime() >= since) onEntry({ data: Buffer.from(m.data), time: m.time.getTime() });
        if (drained()) return settle("drained");
      }
    });
    loop.done.catch((err: unknown) => settle(err instanceof EphemeraError ? err : new UnavailableError(`log store: cannot follow the log of ${runId}`, { cause: err })));
    return {
      done,
      drain: () => {
        void (async () => {
          try {
            drainTo = await this.lastPosition(runId);
            if (drained()) settle("drained");
          } catch (err) {
            settle(err instanceof Error ? err : new Error(String(err)));
          }
        })();
      },
      stop: async () => {
        settle("stopped");
        await loop.done.catch(() => undefined);
      },
    };
  }

  private subject(runId: string): string {
    return `${this.prefix}.log.${runId}`;
  }

  /** The stream position of the run's last record (0: none). */
  private async lastPosition(runId: string): Promise<number> {
    try {
      return (await this.jsm.streams.getMessage(this.stream, { last_by_subj: this.subject(runId) }))?.seq ?? 0;
    } catch (err) {
      if (err instanceof JetStreamApiError && err.code === NO_MESSAGE_FOUND) return 0;
      throw new UnavailableError(`log store: cannot read the end of the log of ${runId}`, { cause: err });
    }
  }

  /** Runs `fn` after the run's previous write: a large append is several messages, and two at once would interleave. */
  private async inOrder(runId: string, fn: () => Promise<void>): Promise<void> {
    const previous = this.tails.get(runId) ?? Promise.resolve();
    const mine = previous.then(fn);
    const tail = mine.catch(() => undefined);
    this.tails.set(runId, tail);
    void tail.then(() => { if (this.tails.get(runId) === tail) this.tails.delete(runId); });
    await mine;
  }

  private async publish(runId: string, data: Uint8Array, offset: number | undefined): Promise<void> {
    for (let i = 0; i < data.length; i += CHUNK) {
      await unavailableOn(`append to the log of ${runId}`, () => this.js.publish(this.subject(runId), data.subarray(i, i + CHUNK),
        { ...(offset === undefined ? {} : { msgID: `${runId}@${offset + i}` }), timeout: this.timeoutMs }));
    }
  }
}

async function unavailableOn<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof EphemeraError) throw err;
    throw new UnavailableError(`log store: cannot ${what}`, { cause: err });
  }
}

interface Stored extends LogEntry {
  end?: true;
}

interface Follower {
  since: number;
  deliver(s: Stored): void;
}

export interface InMemoryLogStoreOptions {
  retentionMs?: number;
  now?: () => number;
}

export class InMemoryLogStore implements LogStore {
  private readonly logs = new Map<string, Stored[]>();
  /** Ids of recent writes (`<runId>@<offset>`, `<runId>@end`) and when they were written, as JetStream's window. */
  private readonly recent = new Map<string, number>();
  private readonly followers = new Map<string, Set<Follower>>();
  private available = true;
  private readonly retentionMs: number;
  private readonly now: () => number;

  constructor({ retentionMs = DEFAULT_LOG_RETENTION_MS, now = Date.now }: InMemoryLogStoreOptions = {}) {
    this.retentionMs = retentionMs;
    this.now = now;
  }

  /** While false, every call rejects with UnavailableError, as while NATS is down. */
  setAvailable(available: boolean): void {
    this.available = available;
  }

  async append(runId: string, chunk: Uint8Array, { offset }: AppendOptions = {}): Promise<void> {
    checkRunId(runId);
    this.check(`append to the log of ${runId}`);
    if (chunk.length === 0) return;
    if (offset !== undefined && this.duplicate(`${runId}@${offset}`)) return;
    this.store(runId, { data: Buffer.from(chunk), time: this.now() });
  }

  async end(runId: string): Promise<void> {
    checkRunId(runId);
    this.check(`end the log of ${runId}`);
    if (this.duplicate(`${runId}@end`)) return;
    this.store(runId, { data: Buffer.alloc(0), time: this.now(), end: true });
  }

  async read(runId: string): Promise<Buffer> {
    return Buffer.concat((await this.entries(runId)).map((e) => e.data));
  }

  async entries(runId: string, { since = 0 }: ReadOptions = {}): Promise<LogEntry[]> {
    checkRunId(runId);
    this.check(`read the log of ${runId}`);
    // Copies, as a read from the stream is.
    return this.kept(runId).filter((s) => !s.end && s.time >= since).map((s) => ({ data: Buffer.from(s.data), time: s.time }));
  }

  follow(runId: string, { since = 0 }: ReadOptions, onEntry: (entry: LogEntry) => void): LogFollower {
    let settled = false;
    let settle!: (end: FollowEnd | Error) => void;
    const done = new Promise<FollowEnd>((resolve, reject) => {
      settle = (end) => {
        if (settled) return;
        settled = true;
        this.followers.get(runId)?.delete(follower);
        if (end instanceof Error) reject(end); else resolve(end);
      };
    });
    done.catch(() => undefined);
    // Delivered in microtasks, in order, never inside the caller's append (as from a consumer).
    const follower: Follower = {
      since,
      deliver: (s) => queueMicrotask(() => {
        if (settled) return;
        if (s.end) return settle("ended");
        if (s.time >= since) onEntry({ data: Buffer.from(s.data), time: s.time });
      }),
    };
    try {
      checkRunId(runId);
      this.check(`follow the log of ${runId}`);
      for (const s of this.kept(runId)) follower.deliver(s);
      let set = this.followers.get(runId);
      if (!set) this.followers.set(runId, (set = new Set()));
      set.add(follower);
    } catch (err) {
      queueMicrotask(() => settle(err as Error));
    }
    return {
      done,
      drain: () => queueMicrotask(() => settle("drained")),
      stop: async () => settle("stopped"),
    };
  }

  private store(runId: string, s: Stored): void {
    this.logs.set(runId, [...this.kept(runId), s]);
    for (const f of this.followers.get(runId) ?? []) f.deliver(s);
  }

  /** The run's entries still within the retention period. */
  private kept(runId: string): Stored[] {
    const oldest = this.now() - this.retentionMs;
    const all = this.logs.get(runId) ?? [];
    const kept = all.filter((s) => s.time >= oldest);
    if (kept.length !== all.length) {
      if (kept.length) this.logs.set(runId, kept); else this.logs.delete(runId);
    }
    return kept;
  }

  private duplicate(id: string): boolean {
    const now = this.now();
    for (const [k, at] of this.recent) {
      if (now - at <= DUPLICATE_WINDOW_MS) break; // in insertion order: the rest are younger
      this.recent.delete(k);
    }
    if (this.recent.has(id)) return true;
    this.recent.set(id, now);
    return false;
  }

  private check(what: string): void {
    if (!this.available) throw new UnavailableError(`log store: cannot ${what}: unavailable`);
  }
}
