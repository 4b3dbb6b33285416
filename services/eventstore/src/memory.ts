// The in-memory twin of the JetStream store: same contract, no I/O. Used by unit tests
// and by anything that wants the domain without servers.
import { ConcurrencyError } from "@ephemera/kit";
import { ulidGen } from "@ephemera/kit";
import { envelopes } from "./envelope.js";
import type {
  AggregateEvents, AppendMeta, AppendResult, Commit, CommitHandler, DurableOptions, EventStore, Expected,
  FollowOptions, NewEvent, Subscription,
} from "./types.js";

interface Listener { matches: (c: Commit) => boolean; push: (c: Commit) => void }

export class InMemoryEventStore implements EventStore {
  private readonly commits: Commit[] = [];
  private readonly commitIds = new Map<string, Commit>();
  private readonly durables = new Map<string, number>();
  private readonly listeners = new Set<Listener>();
  private readonly newId = ulidGen();

  constructor(private readonly now: () => Date = () => new Date()) {}

  async append(aggregate: string, id: string, expected: Expected, events: NewEvent[], meta: AppendMeta): Promise<AppendResult> {
    if (meta.commitId) {
      const dup = this.commitIds.get(meta.commitId);
      if (dup) return { revision: dup.position, version: dup.events.at(-1)!.sequence, events: dup.events, duplicate: true };
    }
    const current = this.last(aggregate, id);
    if ((current?.position ?? 0) !== expected.revision) {
      throw new ConcurrencyError(`${aggregate}.${id}`, expected.revision);
    }
    const position = this.commits.length + 1;
    const recorded = envelopes(events, meta, {
      aggregate, aggregateId: id, firstSequence: expected.version + 1, position, now: this.now, newId: this.newId,
    });
    const commit: Commit = { aggregate, aggregateId: id, position, events: recorded };
    this.commits.push(commit);
    if (meta.commitId) this.commitIds.set(meta.commitId, commit);
    for (const l of this.listeners) if (l.matches(commit)) l.push(commit);
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
    return this.deliver(options.from ?? 0, options.aggregate, handler, undefined);
  }

  subscribe(options: DurableOptions, handler: CommitHandler): Subscription {
    const from = this.durables.get(options.durable) ?? options.from ?? 0;
    return this.deliver(from, options.aggregate, handler, options);
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

  private deliver(from: number, aggregate: string | undefined, handler: CommitHandler, durable: DurableOptions | undefined): Subscription {
    const matches = (c: Commit) => aggregate === undefined || c.aggregate === aggregate;
    const queue: Commit[] = this.commits.slice(from).filter(matches);
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
        const next = queue[0];
        if (!next) { await new Promise<void>((r) => (wake = r)); wake = undefined; continue; }
        try {
          await handler(next);
          queue.shift();
          if (durable) this.durables.set(durable.durable, next.position);
          if (next.position >= caughtUpAt) markCaughtUp();
        } catch {
          if (!durable) { queue.shift(); continue; }
          await new Promise((r) => setTimeout(r, durable.retryDelayMs ?? 100));
        }
      }
    })();
    return {
      caughtUp,
      stop: async () => { stopped = true; this.listeners.delete(listener); wake?.(); await loop; },
    };
  }
}
