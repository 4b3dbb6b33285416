// Step logs on JetStream: `<prefix>.log.<runId>`, one or more chunks per run, kept for a
// bounded time. Written by the runner, read by the sandbox service for `eph logs`. The
// in-memory twin passes the same contract (logs-contract.testkit.ts).
import type { NatsConnection } from "@nats-io/nats-core";
import {
  JetStreamApiError, StorageType, jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager,
} from "@nats-io/jetstream";
import { EphemeraError, UnavailableError, ValidationError } from "@ephemera/kit";
import { readSubject } from "./subject.js";

/**
 * Both methods reject with ValidationError for a run id that is not literal, and with
 * UnavailableError while the backend cannot answer: a log is never reported empty because
 * it could not be read.
 */
export interface LogStore {
  /** Appends to the run's log; concurrent appends to one run each land whole, in call order. */
  append(runId: string, chunk: Uint8Array): Promise<void>;
  /** The run's whole log; empty for a run that has none. */
  read(runId: string): Promise<Buffer>;
}

const CHUNK = 64 * 1024;
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
  maxAgeDays?: number;
  /** Deadline of each JetStream request, so a call fails instead of waiting for a lost server. */
  timeoutMs?: number;
}

export class JetStreamLogStore implements LogStore {
  /** The last append of each run still in flight: the next one starts after it. */
  private readonly tails = new Map<string, Promise<void>>();

  private constructor(private readonly js: JetStreamClient, private readonly jsm: JetStreamManager, private readonly prefix: string) {}

  static async open(nc: NatsConnection, prefix: string, { maxAgeDays = 7, timeoutMs = 10_000 }: LogStoreOptions = {}): Promise<JetStreamLogStore> {
    const jsm = await jetstreamManager(nc, { timeout: timeoutMs });
    try {
      await jsm.streams.info(logStreamName(prefix));
    } catch (err) {
      if (!(err instanceof JetStreamApiError)) throw err;
      await jsm.streams.add({
        name: logStreamName(prefix),
        subjects: [`${prefix}.log.>`],
        storage: StorageType.File,
        max_age: maxAgeDays * 24 * 3600 * 1_000_000_000,
      });
    }
    return new JetStreamLogStore(jetstream(nc, { timeout: timeoutMs }), jsm, prefix);
  }

  async append(runId: string, data: Uint8Array): Promise<void> {
    checkRunId(runId);
    // A large append is several messages: two at once to one run would interleave them.
    const previous = this.tails.get(runId) ?? Promise.resolve();
    const mine = previous.then(() => this.publish(runId, data));
    const tail = mine.catch(() => undefined);
    this.tails.set(runId, tail);
    void tail.then(() => { if (this.tails.get(runId) === tail) this.tails.delete(runId); });
    await mine;
  }

  async read(runId: string): Promise<Buffer> {
    checkRunId(runId);
    const subject = `${this.prefix}.log.${runId}`;
    const { messages } = await unavailableOn(`read the log of ${runId}`, () => readSubject(this.js, this.jsm, logStreamName(this.prefix), subject));
    return Buffer.concat(messages.map((m) => m.data));
  }

  private async publish(runId: string, data: Uint8Array): Promise<void> {
    for (let i = 0; i < data.length; i += CHUNK) {
      await unavailableOn(`append to the log of ${runId}`, () => this.js.publish(`${this.prefix}.log.${runId}`, data.subarray(i, i + CHUNK)));
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

export class InMemoryLogStore implements LogStore {
  private readonly logs = new Map<string, Buffer[]>();
  private available = true;

  /** While false, every call rejects with UnavailableError, as while NATS is down. */
  setAvailable(available: boolean): void {
    this.available = available;
  }

  async append(runId: string, chunk: Uint8Array): Promise<void> {
    checkRunId(runId);
    this.check(`append to the log of ${runId}`);
    if (chunk.length === 0) return;
    this.logs.set(runId, [...(this.logs.get(runId) ?? []), Buffer.from(chunk)]);
  }

  async read(runId: string): Promise<Buffer> {
    checkRunId(runId);
    this.check(`read the log of ${runId}`);
    return Buffer.concat(this.logs.get(runId) ?? []); // a copy, as a read from the stream is
  }

  private check(what: string): void {
    if (!this.available) throw new UnavailableError(`log store: cannot ${what}: unavailable`);
  }
}
