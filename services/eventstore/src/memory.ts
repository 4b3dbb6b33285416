// The in-memory twin of the JetStream store: same contract, no I/O. Used by unit tests
// and by anything that wants the domain without servers. Durable subscriptions behave as
// JetStream's durable pull consumers do: shared by the subscriptions of one name, a
// failing commit set aside and redelivered with backoff while the rest flow, dead letters
// after the last delivery.
import { ConcurrencyError, TooLargeError, isRetryable, ulidGen } from "@ephemera/kit";
import { deadLetter, recordDeadLetter } from "./deadletter.js";
import { envelopes, storedForm } from "./envelope.js";
import {
  backoffFor, redeliveryPolicy,
  type AggregateEvents, type AppendMeta, type AppendResult, type Commit, type CommitHandler, type DurableOptions,
  type EventStore, type Expected, type FollowOptions, type NewEvent, type RedeliveryPolicy, type Subscription,
} from "./types.js";

interface Listener { matches: (c: Commit) => boolean; push: (c: Commit) => void }

/** The server-side state of one durable consumer. */
interface Durable {
  aggregate: string | undefined;
  policy: RedeliveryPolicy;
  /** Index into the store's commits of the next commit never delivered. */
  cursor: number;
  /** Delivered and failed (or returned by a stopped subscription): due again at `due`. */
  redeliver: Array<{ commit: Commit; deliveries: number; due: number }>;
  wake: Set<() => void>;
}

export interface InMemoryEventStoreOptions {
  now?: () => Date;
  duplicateWindowMs?: number;
  /** The largest commit taken, as NATS's max_payload (1 MiB by default). */
  maxPayloadBytes?: number;
}

export class InMemoryEventStore implements EventStore {
  private readonly commits: Commit[] = [];
  private readonly commitIds = new Map<string, { commit: Commit; at: number }>();
  private readonly durables = new Map<string, Durable>();
  private readonly listeners = new Set<Listener>();
  private readonly newId = ulidGen();
  private readonly now: () => Date;
  readonly duplicateWindowMs: number;
  private readonly maxPayloadBytes: number;

  constructor(options: InMemoryEventStoreOptions | (() => Date) = {}) {
    const o = typeof options === "function" ? { now: options } : options;
    this.now = o.now ?? (() => new Date());
    this.duplicateWindowMs = o.duplicateWindowMs ?? 2 * 60_000;
    this.maxPayloadBytes = o.maxPayloadBytes ?? 1024 * 1024;
  }

  async append(aggregate: string, id: string, expected: Expected, events: NewEvent[], meta: AppendMeta): Promise<AppendResult> {
    const at = this.now().getTime();
    if (meta.commitId) {
      const seen = this.commitIds.get(meta.commitId);
      if (seen && at - seen.at < this.duplicateWindowMs) {
        const read = await this.read(seen.commit.aggregate, seen.commit.aggregateId);
        return { revision: read.revision, version: read.version, events: seen.commit.events, duplicate: true };
      }
    }
    const current = this.last(aggregate, id);
    if ((current?.position ?? 0) !== expected.revision) {
      throw new ConcurrencyError(`${aggregate}.${id}`, expected.revision);
    }
    if (meta.expectedPosition !== undefined && this.commits.length !== meta.expectedPosition) {
      throw new ConcurrencyError(`${aggregate}.${id} (the store moved past position ${meta.expectedPosition})`, expected.revision);
    }
    const position = this.commits.length + 1;
    const recorded = envelopes(events, meta, {
      aggregate, aggregateId: id, firstSequence: expected.version + 1, position, now: this.now, newId: this.newId,
    });
    const size = Buffer.byteLength(JSON.stringify(recorded.map(storedForm)));
    if (size > this.maxPayloadBytes) {
      throw new TooLargeError(`the commit to ${aggregate}.${id} is ${size} bytes, over the server's max_payload of ${this.maxPayloadBytes} bytes`);
    }
    const commit: Commit = { aggregate, aggregateId: id, position, events: recorded };
    this.commits.push(commit);
    if (meta.commitId) this.commitIds.set(meta.commitId, { commit, at });
    for (const l of this.listeners) if (l.matches(commit)) l.push(commit);
    for (const d of this.durables.values()) for (const w of d.wake) w();
    return { revision: position, version: expected.version + events.length, events: recorded, duplicate: false };
  }

  async read(aggregate: string, id: string): Promise<AggregateEvents> {
    const mine = this.commits.filter((c) => c.aggregate === aggregate && c.aggregateId === id);
    const events = mine.flatMap((c) => c.events);
    return { events, revision: mine.at(-1)?.position ?? 0, version: events.length };
  }

  async position(): Promise<number> {
    return this.commits.length;
  }

  follow(options: FollowOptions, handler: CommitHandler): Subscription {
    const matches = (c: Commit) => options.aggregate === undefined || c.aggregate === options.aggregate;
    const since = !options.from && options.since ? options.since.getTime() : undefined;
    const recent = (c: Commit) => since === undefined || Date.parse(c.events[0]?.time ?? "") >= since;
    const queue: Commit[] = this.commits.slice(options.from ?? 0).filter((c) => matches(c) && recent(c));
    const caughtUpAt = queue.at(-1)?.position ?? 0;
    let stopped = false;
    let wake: (() => void) | undefined;
    let markCaughtUp!: () => void;
    const caughtUp = new Promise<void>((r) => (markCaughtUp = r));
    const listener: Listener = { matches, push: (c) => { queue.push(c); wake?.(); } };
    this.listeners.add(listener);
    const loop = (async () => {
      if (caughtUpAt === 0) markCaughtUp();
      while (!stopped) {
        const next = queue.shift();
        if (!next) { await new Promise<void>((r) => (wake = r)); wake = undefined; continue; }
        try { await handler(next); } catch { /* at most once: a follower skips what it cannot handle */ }
        if (next.position >= caughtUpAt) markCaughtUp();
      }
    })();
    return {
      caughtUp,
      stop: async () => { stopped = true; this.listeners.delete(listener); wake?.(); await loop; },
    };
  }

  subscribe(options: DurableOptions, handler: CommitHandler): Subscription {
    let durable = this.durables.get(options.durable);
    if (!durable) {
      durable = {
        aggregate: options.aggregate, policy: redeliveryPolicy(options.redelivery),
        cursor: options.from ?? 0, redeliver: [], wake: new Set(),
      };
      this.durables.set(options.durable, durable);
    }
    const d = durable;
    const matches = (c: Commit) => d.aggregate === undefined || c.aggregate === d.aggregate;
    const caughtUpAt = this.commits.length;
    let stopped = false;
    let wake: (() => void) | undefined;
    let timer: NodeJS.Timeout | undefined;
    const wakeUp = () => wake?.();
    d.wake.add(wakeUp);
    let markCaughtUp!: () => void;
    const caughtUp = new Promise<void>((r) => (markCaughtUp = r));
    const next = (): { commit: Commit; deliveries: number } | number | undefined => {
      const now = Date.now();
      const due = d.redeliver.findIndex((r) => r.due <= now);
      if (due >= 0) return d.redeliver.splice(due, 1)[0];
      while (d.cursor < this.commits.length) {
        const commit = this.commits[d.cursor++]!;
        if (matches(commit)) return { commit, deliveries: 0 };
      }
      if (d.cursor >= caughtUpAt && d.redeliver.every((r) => r.commit.position > caughtUpAt || r.deliveries > 0)) markCaughtUp();
      return d.redeliver.length ? Math.min(...d.redeliver.map((r) => r.due)) - now : undefined;
    };
    const loop = (async () => {
      while (!stopped) {
        const item = next();
        if (item === undefined || typeof item === "number") {
          await new Promise<void>((r) => {
            wake = r;
            if (typeof item === "number") timer = setTimeout(r, Math.max(item, 1));
          });
          clearTimeout(timer);
          wake = undefined;
          continue;
        }
        const deliveries = item.deliveries + 1;
        try {
          const again = await handler(item.commit);
          if (again) d.redeliver.push({ commit: item.commit, deliveries, due: Date.now() + Math.max(1, again.againInMs) });
        } catch (err) {
          if (stopped) { d.redeliver.push({ commit: item.commit, deliveries, due: 0 }); break; }
          await this.failed(options.durable, d, item.commit, deliveries, err);
        }
      }
    })();
    return {
      caughtUp,
      stop: async () => {
        stopped = true;
        d.wake.delete(wakeUp);
        wake?.();
        await loop;
      },
    };
  }

  private async failed(name: string, d: Durable, commit: Commit, deliveries: number, err: unknown): Promise<void> {
    if (isRetryable(err) && deliveries < d.policy.maxDeliver) {
      d.redeliver.push({ commit, deliveries, due: Date.now() + backoffFor(d.policy, deliveries) });
      return;
    }
    await recordDeadLetter(this, deadLetter(name, {
      aggregate: commit.aggregate, aggregateId: commit.aggregateId, position: commit.position, types: commit.events.map((e) => e.type),
    }, deliveries, err));
  }

  async close(): Promise<void> {
    this.listeners.clear();
  }

  private last(aggregate: string, id: string): Commit | undefined {
    for (let i = this.commits.length - 1; i >= 0; i--) {
      const c = this.commits[i]!;
      if (c.aggregate === aggregate && c.aggregateId === id) return c;
    }
    return undefined;
  }
}
