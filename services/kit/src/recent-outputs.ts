// The outputs of recent runs, in this process's memory (the IO context's, and a runner's for
// the steps it runs itself): what a step stored here, or what a
// read here fetched, kept by run (least recently used first out, bounded in bytes). A value
// is served from here only when its SHA-256 is the one the workflow's `step_succeeded`
// journaled, so memory is never trusted over the journal: a missing or different value is a
// miss, and the call reads the cache and the journal as before. A deleted sandbox's runs are
// forgotten when the deletion is seen (every replica sees it).
import { createHash } from "node:crypto";
import { LRUCache } from "lru-cache";

/** Default bound of the values held (EPHEMERA_IOCONTEXT_RECENT_BYTES, EPHEMERA_RUNNER_RECENT_BYTES). */
export const DEFAULT_RECENT_BYTES = 64 * 1024 * 1024;

/** What a run's entry costs besides its values (the maps, names and digests), roughly. */
const ENTRY_OVERHEAD = 256;

interface Held { value: Buffer; sha256: string }
interface Run { routingKey: string; outputs: Map<string, Held> }

/** An output a reader wants, with the digest its run's success journaled. */
export interface Wanted { name: string; sha256: string }

export class RecentOutputs {
  private readonly runs: LRUCache<string, Run>;
  /** Routing key → its runs held, so a deleted sandbox's go at once. */
  private readonly bySandbox = new Map<string, Set<string>>();

  /** `ttlMs`: a run's values leave memory this long after they were held, whatever is read (absent: only past the bound). */
  constructor(maxBytes = DEFAULT_RECENT_BYTES, options: { ttlMs?: number } = {}) {
    this.runs = new LRUCache<string, Run>({
      maxSize: Math.max(1, maxBytes),
      ...(options.ttlMs ? { ttl: options.ttlMs, ttlAutopurge: true, updateAgeOnGet: false } : {}),
      sizeCalculation: (run) => {
        let size = ENTRY_OVERHEAD;
        for (const [name, held] of run.outputs) size += name.length + held.value.length + held.sha256.length;
        return size;
      },
      dispose: (run, runId) => this.unindex(run.routingKey, runId),
    });
  }

  /** How many runs, and how many bytes, are held. */
  get size(): { runs: number; bytes: number } {
    return { runs: this.runs.size, bytes: this.runs.calculatedSize };
  }

  /** Holds a run's outputs (added to those it held); a run bigger than the bound is not held. */
  remember(runId: string, routingKey: string, outputs: Iterable<{ name: string; value: Uint8Array }>): void {
    const merged = new Map(this.runs.peek(runId)?.outputs);
    for (const o of outputs) {
      const value = Buffer.from(o.value);
      merged.set(o.name, { value, sha256: createHash("sha256").update(value).digest("hex") });
    }
    // A new entry rather than one changed in place: the cache sizes an entry when it is set.
    this.runs.set(runId, { routingKey, outputs: merged });
    if (!this.runs.has(runId)) return;
    const held = this.bySandbox.get(routingKey) ?? new Set<string>();
    held.add(runId);
    this.bySandbox.set(routingKey, held);
  }

  /** Every wanted value, each matching its digest; undefined when any is not held as journaled. */
  take(runId: string, wanted: Wanted[]): Map<string, Buffer> | undefined {
    const run = this.runs.get(runId);
    if (!run || !wanted.length) return undefined;
    const values = new Map<string, Buffer>();
    for (const w of wanted) {
      const held = run.outputs.get(w.name);
      if (!held || !w.sha256 || held.sha256 !== w.sha256) return undefined;
      values.set(w.name, held.value);
    }
    return values;
  }

  /** Forgets every run of a sandbox (it was deleted); returns how many went. */
  forget(routingKey: string): number {
    const held = [...(this.bySandbox.get(routingKey) ?? [])];
    for (const runId of held) this.runs.delete(runId);
    this.bySandbox.delete(routingKey);
    return held.length;
  }

  private unindex(routingKey: string, runId: string): void {
    const held = this.bySandbox.get(routingKey);
    if (!held) return;
    held.delete(runId);
    if (!held.size) this.bySandbox.delete(routingKey);
  }
}
