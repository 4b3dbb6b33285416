// The dispatch work queue: one message per step attempt on `<prefix>.run.<cluster>`,
// taken by exactly one runner of that cluster, which heartbeats while the step runs and
// acknowledges once the result is recorded. Cancellations travel on core NATS
// `<prefix>.cancel.<cluster>` (best effort: a missed cancel only lets a step finish).
import type { NatsConnection, Subscription as NatsSub } from "@nats-io/nats-core";
import {
  AckPolicy, JetStreamApiError, RetentionPolicy, StorageType, jetstream, jetstreamManager, type JsMsg,
} from "@nats-io/jetstream";
import { UnavailableError, delay, type Logger } from "@ephemera/kit";

export interface WorkItem<T> {
  data: T;
  /** How many times this message has been delivered (1 on first delivery). */
  deliveries: number;
  /** Tells the queue the item is still being worked on. */
  heartbeat(): void;
}

export interface WorkQueueConsumer {
  stop(): Promise<void>;
}

export interface WorkQueue<T> {
  /** Publishes once per id: a second publish with the same id (within the dedupe window) is dropped. */
  publish(cluster: string, id: string, data: T): Promise<void>;
  /** Runs `handler` for each item, at most `concurrency` at once; acked when it resolves, redelivered when it throws. */
  consume(cluster: string, concurrency: number, handler: (item: WorkItem<T>) => Promise<void>): WorkQueueConsumer;
  cancel(cluster: string, message: unknown): void;
  onCancel(cluster: string, handler: (message: unknown) => void): WorkQueueConsumer;
}

export const runStreamName = (prefix: string) => `${prefix}_run`;

export class JetStreamWorkQueue<T> implements WorkQueue<T> {
  private constructor(
    private readonly nc: NatsConnection,
    private readonly prefix: string,
    private readonly codec: { encode(d: T): string; decode(s: string): T },
    private readonly logger?: Logger,
    private readonly ackWaitMs = 30_000,
  ) {}

  static async open<T>(
    nc: NatsConnection,
    prefix: string,
    codec: { encode(d: T): string; decode(s: string): T },
    logger?: Logger,
  ): Promise<JetStreamWorkQueue<T>> {
    const jsm = await jetstreamManager(nc, { timeout: 10_000 });
    const name = runStreamName(prefix);
    try {
      await jsm.streams.info(name);
    } catch (err) {
      if (!(err instanceof JetStreamApiError)) throw err;
      await jsm.streams.add({
        name,
        subjects: [`${prefix}.run.>`],
        retention: RetentionPolicy.Workqueue,
        storage: StorageType.File,
        duplicate_window: 2 * 60 * 1_000_000_000,
      });
    }
    return new JetStreamWorkQueue(nc, prefix, codec, logger);
  }

  async publish(cluster: string, id: string, data: T): Promise<void> {
    try {
      await jetstream(this.nc).publish(`${this.prefix}.run.${cluster}`, this.codec.encode(data), { msgID: id });
    } catch (err) {
      throw new UnavailableError(`dispatch ${id} to cluster ${cluster} failed`, { cause: err });
    }
  }

  consume(cluster: string, concurrency: number, handler: (item: WorkItem<T>) => Promise<void>): WorkQueueConsumer {
    let stopped = false;
    let inFlight = 0;
    let wake: (() => void) | undefined;
    const running = new Set<Promise<void>>();
    const durable = `runner_${cluster}`;
    const work = async (m: JsMsg) => {
      const beat = setInterval(() => m.working(), this.ackWaitMs / 3);
      try {
        await handler({ data: this.codec.decode(m.string()), deliveries: m.info.deliveryCount, heartbeat: () => m.working() });
        m.ack();
      } catch (err) {
        this.logger?.warn({ err, subject: m.subject }, "work item failed; will be redelivered");
        m.nak(1000);
      } finally {
        clearInterval(beat);
      }
    };
    const loop = (async () => {
      const jsm = await jetstreamManager(this.nc);
      const stream = runStreamName(this.prefix);
      try {
        await jsm.consumers.info(stream, durable);
      } catch {
        await jsm.consumers.add(stream, {
          durable_name: durable,
          ack_policy: AckPolicy.Explicit,
          ack_wait: this.ackWaitMs * 1_000_000,
          filter_subject: `${this.prefix}.run.${cluster}`,
          max_ack_pending: 1000,
        });
      }
      const consumer = await jetstream(this.nc).consumers.get(stream, durable);
      while (!stopped) {
        if (inFlight >= concurrency) { await new Promise<void>((r) => (wake = r)); continue; }
        let batch;
        try {
          batch = await consumer.fetch({ max_messages: concurrency - inFlight, expires: 1000 });
        } catch (err) {
          this.logger?.warn({ err }, "fetch from work queue failed");
          await delay(500);
          continue;
        }
        for await (const m of batch) {
          if (stopped) { m.nak(); continue; }
          inFlight++;
          const p: Promise<void> = work(m).finally(() => { inFlight--; running.delete(p); wake?.(); });
          running.add(p);
        }
      }
    })();
    return {
      stop: async () => {
        stopped = true;
        wake?.();
        await loop.catch(() => undefined);
        await Promise.allSettled([...running]);
      },
    };
  }

  cancel(cluster: string, message: unknown): void {
    this.nc.publish(`${this.prefix}.cancel.${cluster}`, JSON.stringify(message));
  }

  onCancel(cluster: string, handler: (message: unknown) => void): WorkQueueConsumer {
    const sub: NatsSub = this.nc.subscribe(`${this.prefix}.cancel.${cluster}`, {
      callback: (err, m) => { if (!err) handler(m.json()); },
    });
    return { stop: async () => sub.unsubscribe() };
  }
}

/** In-memory twin: items are handed to the consumer of their cluster, once per id. */
export class InMemoryWorkQueue<T> implements WorkQueue<T> {
  readonly published: Array<{ cluster: string; id: string; data: T }> = [];
  private readonly seen = new Set<string>();
  private readonly handlers = new Map<string, (item: WorkItem<T>) => Promise<void>>();
  private readonly cancelHandlers = new Map<string, (m: unknown) => void>();
  readonly cancels: Array<{ cluster: string; message: unknown }> = [];

  async publish(cluster: string, id: string, data: T): Promise<void> {
    if (this.seen.has(id)) return;
    this.seen.add(id);
    this.published.push({ cluster, id, data });
    const h = this.handlers.get(cluster);
    if (h) void h({ data, deliveries: 1, heartbeat: () => undefined });
  }

  consume(cluster: string, _concurrency: number, handler: (item: WorkItem<T>) => Promise<void>): WorkQueueConsumer {
    this.handlers.set(cluster, handler);
    return { stop: async () => { this.handlers.delete(cluster); } };
  }

  cancel(cluster: string, message: unknown): void {
    this.cancels.push({ cluster, message });
    this.cancelHandlers.get(cluster)?.(message);
  }

  onCancel(cluster: string, handler: (message: unknown) => void): WorkQueueConsumer {
    this.cancelHandlers.set(cluster, handler);
    return { stop: async () => { this.cancelHandlers.delete(cluster); } };
  }
}
