// A step's log as the runner keeps it: the whole log (up to a cap, then its end) for the
// log store, and a short tail for the failure event.

export const TAIL_LINES = 40;
export const TAIL_BYTES = 4096;

export class StepLog {
  private readonly head: Buffer[] = [];
  private headBytes = 0;
  private dropped = 0;
  private end = Buffer.alloc(0);

  constructor(private readonly capBytes = 8 * 1024 * 1024, private readonly endBytes = 64 * 1024) {}

  write(chunk: Buffer): void {
    const room = Math.max(0, this.capBytes - this.headBytes);
    if (room > 0) {
      const part = chunk.subarray(0, room);
      this.head.push(part);
      this.headBytes += part.length;
    }
    this.dropped += Math.max(0, chunk.length - room);
    this.end = Buffer.concat([this.end, chunk]).subarray(-this.endBytes);
  }

  /** The log to store: everything, or the first `capBytes` and the end with a marker between. */
  contents(): Buffer {
    if (this.dropped === 0) return Buffer.concat(this.head);
    const kept = this.end.subarray(-Math.min(this.end.length, this.dropped));
    const cut = this.dropped - kept.length;
    return Buffer.concat([...this.head, Buffer.from(`\n[ephemera] ${cut} bytes of log left out\n`), kept]);
  }

  /** The last TAIL_LINES lines, at most TAIL_BYTES bytes. */
  tail(): string {
    const bytes = this.end.subarray(-TAIL_BYTES);
    let text = bytes.toString("utf8");
    if (bytes.length < this.end.length || this.dropped > 0) {
      // Cut mid-line: drop the partial first line unless it is all there is.
      const nl = text.indexOf("\n");
      if (nl >= 0 && nl < text.length - 1) text = text.slice(nl + 1);
    }
    const lines = (text.endsWith("\n") ? text.slice(0, -1) : text).split("\n");
    return lines.slice(-TAIL_LINES).join("\n");
  }
}
