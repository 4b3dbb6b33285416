// The aggregates an event store handle has read or written lately, bounded by count and by
// the size of their stored commits, least recently used first out. What is kept is only a
// starting point: a read still asks the server for the subject's last sequence, and uses
// what is kept only for the commits up to the revision it was kept at.
import type { RecordedEvent } from "./types.js";

export interface CachedAggregate {
  /** Stream position of the last commit kept. */
  readonly revision: number;
  /** Sequence of the last event kept. */
  readonly version: number;
  readonly events: readonly RecordedEvent[];
  /** Bytes of the stored commits: what the bound on memory counts. */
  readonly bytes: number;
}

export interface AggregateCacheOptions {
  /** How many aggregates are kept at most (default 10,000; 0 keeps none). */
  aggregates?: number;
  /** How many bytes of stored commits are kept at most, all aggregates together (default 64 MiB). */
  bytes?: number;
}

export class AggregateCache {
  // A Map iterates in insertion order: re-inserting on use keeps the least recently used first.
  private readonly entries = new Map<string, CachedAggregate>();
  private bytes = 0;
  readonly maxAggregates: number;
  readonly maxBytes: number;

  constructor(options: AggregateCacheOptions = {}) {
    this.maxAggregates = options.aggregates ?? 10_000;
    this.maxBytes = options.bytes ?? 64 * 1024 * 1024;
  }

  get size(): number {
    return this.entries.size;
  }

  get(subject: string): CachedAggregate | undefined {
    const entry = this.entries.get(subject);
    if (entry) {
      this.entries.delete(subject);
      this.entries.set(subject, entry);
    }
    return entry;
  }

  /** Keeps `entry` unless what is kept is already newer (two reads racing). */
  set(subject: string, entry: CachedAggregate): void {
    const kept = this.entries.get(subject);
    if (kept && kept.revision > entry.revision) return;
    this.delete(subject);
    if (entry.bytes > this.maxBytes || this.maxAggregates <= 0) return;
    this.entries.set(subject, entry);
    this.bytes += entry.bytes;
    for (const [oldest, e] of this.entries) {
      if (this.entries.size <= this.maxAggregates && this.bytes <= this.maxBytes) break;
      this.entries.delete(oldest);
      this.bytes -= e.bytes;
    }
  }

  delete(subject: string): void {
    const kept = this.entries.get(subject);
    if (!kept) return;
    this.entries.delete(subject);
    this.bytes -= kept.bytes;
  }
}
