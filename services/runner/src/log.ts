// A step's log as the runner keeps it: streamed to the log store while the step runs, in
// batches, up to a bound (then a marker, and the log's end once the step is over), and a
// short tail for the failure event.
import type { LogStore } from "@ephemera/eventstore";

export const TAIL_LINES = 40;
export const TAIL_BYTES = 4096;
/** What a step's log may store as it runs; past it, only its last END_BYTES are kept, stored when it ends. */
export const LOG_LIMIT_BYTES = 8 * 1024 * 1024;
export const END_BYTES = 64 * 1024;

const size = (bytes: number) =>
  bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : bytes % 1024 === 0 ? `${bytes / 1024} KiB` : `${bytes} bytes`;

/** Which bytes of a step's output to store and when (pure: no clock, no I/O). */
export class StepLog {
  private stored = 0;
  private dropped = 0;
  /** The last bytes of output (at least max(endBytes, TAIL_BYTES) once there are that many), in pieces. */
  private last: Buffer[] = [];
  private lastBytes = 0;

  constructor(private readonly capBytes = LOG_LIMIT_BYTES, private readonly endBytes = END_BYTES) {}

  /** Takes output; returns what to store now: all of it under the bound, then once a marker, then nothing. */
  write(chunk: Buffer): Buffer {
    this.keepEnd(chunk);
    const room = Math.max(0, this.capBytes - this.stored);
    if (chunk.length <= room) {
      this.stored += chunk.length;
      return chunk;
    }
    const part = chunk.subarray(0, room);
    this.stored += part.length;
    const first = this.dropped === 0;
    this.dropped += chunk.length - part.length;
    if (!first) return part;
    return Buffer.concat([part, Buffer.from(
      `\n[ephemera] the log reached its limit of ${size(this.capBytes)}: what follows is left out, but for its last ${size(this.endBytes)}, stored when the step ends\n`,
    )]);
  }

  private keepEnd(chunk: Buffer): void {
    // Pieces, not one buffer copied on every write: a chatty step writes many small chunks.
    this.last.push(chunk);
    this.lastBytes += chunk.length;
    const keep = Math.max(this.endBytes, TAIL_BYTES);
    while (this.lastBytes - this.last[0]!.length >= keep) this.lastBytes -= this.last.shift()!.length;
  }

  private end(): Buffer {
    return Buffer.concat(this.last).subarray(-Math.max(this.endBytes, TAIL_BYTES));
  }

  /** What to store once the step has ended: nothing, or the end of what was left out, after a line that counts the rest. */
  finish(): Buffer {
    if (this.dropped === 0) return Buffer.alloc(0);
    const end = this.end();
    const kept = end.subarray(-Math.min(this.endBytes, end.length, this.dropped));
    const cut = this.dropped - kept.length;
    return Buffer.concat([Buffer.from(`\n[ephemera] ${cut} bytes of log left out; the last ${kept.length} bytes follow\n`), kept]);
  }

  /** The last TAIL_LINES lines, at most TAIL_BYTES bytes. */
  tail(): string {
    const end = this.end();
    const bytes = end.subarray(-TAIL_BYTES);
    let text = bytes.toString("utf8");
    if (bytes.length < end.length || this.dropped > 0) {
      // Cut mid-line: drop the partial first line unless it is all there is.
      const nl = text.indexOf("\n");
      if (nl >= 0 && nl < text.length - 1) text = text.slice(nl + 1);
    }
    const lines = (text.endsWith("\n") ? text.slice(0, -1) : text).split("\n");
    return lines.slice(-TAIL_LINES).join("\n");
  }
}

export interface LiveLogOptions {
  /** A batch waits at most this long (default 250 ms)... */
  flushMs?: number;
  /** ...or until it holds this much (default 16 KiB). */
  flushBytes?: number;
  /** A batch that could not be stored is tried again after this long (default 1 s). */
  retryMs?: number;
  /** Tries of the last batch and of the log's end when the step is over (default 4). */
  closeAttempts?: number;
  capBytes?: number;
  endBytes?: number;
  /** A write to the store failed (it is tried again); said once per run of failures. */
  onError?: (err: unknown) => void;
}

interface Batch {
  data: Buffer;
  offset: number;
}

/**
 * Streams one run's log to the store while the step runs. Batches carry their byte offset,
 * so a batch stored but not acknowledged and sent again is stored once; a failed batch is
 * sent again exactly as it was, before anything newer.
 */
export class LiveLog {
  private readonly log: StepLog;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Bytes handed to batches so far: the offset of the next batch. */
  private offset = 0;
  /** The batch on its way, or to send again exactly as it is. */
  private unsent?: Batch;
  private failing = false;
  private timer?: NodeJS.Timeout;
  private queued = false;
  private chain: Promise<void> = Promise.resolve();
  private closed = false;
  private readonly o: Required<Omit<LiveLogOptions, "onError">> & Pick<LiveLogOptions, "onError">;

  constructor(private readonly store: LogStore, private readonly runId: string, options: LiveLogOptions = {}) {
    this.o = {
      flushMs: 250, flushBytes: 16 * 1024, retryMs: 1000, closeAttempts: 4, capBytes: LOG_LIMIT_BYTES, endBytes: END_BYTES, ...options,
    };
    this.log = new StepLog(this.o.capBytes, this.o.endBytes);
  }

  /** The step's output, as the driver hands it over. */
  write(chunk: Buffer): void {
    if (this.closed) return;
    this.add(this.log.write(chunk));
    if (this.pendingBytes >= this.o.flushBytes) this.kick();
    else if (this.pendingBytes > 0) this.arm(this.o.flushMs);
  }

  tail(): string {
    return this.log.tail();
  }

  /**
   * Stores what is left (the end of a truncated log included) and the log's end record,
   * each tried a few times; resolves when done or given up on (then `onError` was told).
   */
  async close(): Promise<void> {
    if (this.closed) return this.chain;
    this.closed = true;
    clearTimeout(this.timer);
    this.add(this.log.finish());
    for (let attempt = 1; ; attempt++) {
      this.kick();
      await this.chain;
      if (!this.unsent && this.pendingBytes === 0) break;
      if (attempt >= this.o.closeAttempts) return;
      await new Promise((resolve) => setTimeout(resolve, this.o.retryMs));
    }
    for (let attempt = 1; ; attempt++) {
      try {
        await this.store.end(this.runId);
        return;
      } catch (err) {
        this.report(err);
        if (attempt >= this.o.closeAttempts) return;
        await new Promise((resolve) => setTimeout(resolve, this.o.retryMs));
      }
    }
  }

  private add(bytes: Buffer): void {
    if (bytes.length === 0) return;
    this.pending.push(bytes);
    this.pendingBytes += bytes.length;
  }

  private arm(ms: number): void {
    if (this.timer || this.queued || this.closed) return;
    this.timer = setTimeout(() => { this.timer = undefined; this.kick(); }, ms);
  }

  private kick(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.queued) return;
    this.queued = true;
    this.chain = this.chain.then(async () => {
      this.queued = false;
      await this.flush();
    });
  }

  private async flush(): Promise<void> {
    if (!this.unsent && this.pendingBytes > 0) {
      this.unsent = { data: Buffer.concat(this.pending), offset: this.offset };
      this.offset += this.pendingBytes;
      this.pending = [];
      this.pendingBytes = 0;
    }
    const batch = this.unsent;
    if (!batch) return;
    try {
      await this.store.append(this.runId, batch.data, { offset: batch.offset });
      this.unsent = undefined;
      this.failing = false;
    } catch (err) {
      this.report(err);
      this.arm(this.o.retryMs);
      return;
    }
    // Output that came while this batch was on its way waits for its own timer, or goes now if it is a full batch.
    if (this.pendingBytes >= this.o.flushBytes) this.kick();
    else if (this.pendingBytes > 0) this.arm(this.o.flushMs);
  }

  private report(err: unknown): void {
    if (this.failing) return;
    this.failing = true;
    this.o.onError?.(err);
  }
}
