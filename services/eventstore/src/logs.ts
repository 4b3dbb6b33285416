// Step logs on JetStream: `<prefix>.log.<runId>`, one or more chunks per run, kept for a
// bounded time. Written by the runner, read by the sandbox service for `eph logs`.
import type { NatsConnection } from "@nats-io/nats-core";
import { JetStreamApiError, StorageType, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { readSubject } from "./subject.js";

export interface LogStore {
  append(runId: string, chunk: Uint8Array): Promise<void>;
  read(runId: string): Promise<Buffer>;
}

const CHUNK = 64 * 1024;
export const logStreamName = (prefix: string) => `${prefix}_logs`;

export class JetStreamLogStore implements LogStore {
  private constructor(private readonly nc: NatsConnection, private readonly prefix: string) {}

  static async open(nc: NatsConnection, prefix: string, maxAgeDays = 7): Promise<JetStreamLogStore> {
    const jsm = await jetstreamManager(nc, { timeout: 10_000 });
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
    return new JetStreamLogStore(nc, prefix);
  }

  async append(runId: string, data: Uint8Array): Promise<void> {
    const js = jetstream(this.nc);
    for (let i = 0; i < data.length; i += CHUNK) {
      await js.publish(`${this.prefix}.log.${runId}`, data.subarray(i, i + CHUNK));
    }
  }

  async read(runId: string): Promise<Buffer> {
    const { messages } = await readSubject(
      jetstream(this.nc), await jetstreamManager(this.nc), logStreamName(this.prefix), `${this.prefix}.log.${runId}`,
    );
    return Buffer.concat(messages.map((m) => m.data));
  }
}

export class InMemoryLogStore implements LogStore {
  private readonly logs = new Map<string, Buffer>();
  async append(runId: string, chunk: Uint8Array): Promise<void> {
    this.logs.set(runId, Buffer.concat([this.logs.get(runId) ?? Buffer.alloc(0), chunk]));
  }
  async read(runId: string): Promise<Buffer> {
    return this.logs.get(runId) ?? Buffer.alloc(0);
  }
}
