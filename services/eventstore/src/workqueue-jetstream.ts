// The work queue on NATS JetStream: its streams, publishing and each lane's backlog (consuming: workqueue-consume.ts; cancels: cancels.ts).
import type { NatsConnection } from "@nats-io/nats-core";
import { RetentionPolicy, StorageType, jetstream, jetstreamManager, type MsgRequest } from "@nats-io/jetstream";
import { UnavailableError, type Logger } from "@ephemera/kit";
import { followCancels, publishCancel } from "./cancels.js";
import { ensureStream } from "./durables.js";
import { natsHealth, type NatsHealth } from "./health.js";
import { REOPEN_TIMEOUT_MS, consumeLanes, durableName, type LaneConsumerAt } from "./workqueue-consume.js";
import {
  LANES, cancelStreamName, laneSubject, runStreamName,
  type CancelMessage, type Codec, type ConsumeOptions, type Lane, type LaneBacklog, type WorkItem, type WorkQueue, type WorkQueueConsumer, type WorkQueueOptions,
} from "./workqueue.js";

const NANOS_PER_MS = 1_000_000;

export class JetStreamWorkQueue<T> implements WorkQueue<T> {
  private readonly ackWaitMs: number;
  private readonly logger?: Logger;
  /** The connection's health, with this queue's consumers in it. */
  readonly health: NatsHealth;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly prefix: string,
    private readonly codec: Codec<T>,
    options: WorkQueueOptions,
  ) {
    this.ackWaitMs = options.ackWaitMs ?? 30_000;
    if (options.logger) this.logger = options.logger;
    this.health = natsHealth(nc, options.logger);
  }

  static async open<T>(nc: NatsConnection, prefix: string, codec: Codec<T>, options: WorkQueueOptions | Logger = {}): Promise<JetStreamWorkQueue<T>> {
    const o: WorkQueueOptions = "info" in options ? { logger: options as Logger } : options as WorkQueueOptions;
    const window = (o.duplicateWindowMs ?? 2 * 60_000) * NANOS_PER_MS;
    const jsm = await jetstreamManager(nc, { timeout: 10_000 });
    // Moving a stream between replica counts is an operator's step (nats stream edit), not a start's.
    const createOnly: ["num_replicas"] = ["num_replicas"];
    await ensureStream(jsm, {
      config: {
        name: runStreamName(prefix), subjects: [`${prefix}.run.>`], retention: RetentionPolicy.Workqueue,
        storage: StorageType.File, duplicate_window: window, num_replicas: o.replicas ?? 1,
      },
      createOnly,
    }, o.logger);
    await ensureStream(jsm, {
      config: {
        name: cancelStreamName(prefix), subjects: [`${prefix}.cancel.>`], retention: RetentionPolicy.Limits,
        storage: StorageType.File, duplicate_window: window, max_age: 60 * 60_000 * NANOS_PER_MS, num_replicas: o.replicas ?? 1,
      },
      createOnly,
    }, o.logger);
    return new JetStreamWorkQueue(nc, prefix, codec, o);
  }

  async publish(cluster: string, id: string, data: T, lane: Lane = "start"): Promise<void> {
    try {
      await jetstream(this.nc).publish(laneSubject(this.prefix, lane, cluster), this.codec.encode(data), { msgID: id });
    } catch (err) {
      throw new UnavailableError(`dispatch ${id} to cluster ${cluster} failed`, { cause: err });
    }
  }

  consume(cluster: string, options: ConsumeOptions<T>, handler: (item: WorkItem<T>) => Promise<void>): WorkQueueConsumer {
    return consumeLanes(this.at(), cluster, options, handler);
  }

  /**
   * Per lane: the consumer's count of messages not yet delivered, and the first of them
   * (the first message on the lane's subject after the last one delivered) for its age:
   * two requests a lane, so cheap enough for every metrics scrape. Items handed out and
   * waiting for a redelivery are not in it: they are being worked on.
   */
  async backlog(cluster: string): Promise<LaneBacklog[]> {
    const jsm = await jetstreamManager(this.nc, { timeout: REOPEN_TIMEOUT_MS });
    const stream = runStreamName(this.prefix);
    return Promise.all(LANES.map(async (lane) => {
      const info = await jsm.consumers.info(stream, durableName(cluster, lane));
      if (info.num_pending === 0) return { lane, pending: 0, oldestAgeMs: 0 };
      // STREAM.MSG.GET takes next_by_subj (server 2.9); the client types it for direct gets only.
      const next = { next_by_subj: laneSubject(this.prefix, lane, cluster), seq: info.delivered.stream_seq + 1 } as unknown as MsgRequest;
      const first = await jsm.streams.getMessage(stream, next);
      const oldestAgeMs = first ? Math.max(0, Date.now() - first.time.getTime()) : 0;
      return { lane, pending: info.num_pending, oldestAgeMs };
    }));
  }

  async cancel(cluster: string, message: CancelMessage): Promise<void> {
    await publishCancel(this.at(), cluster, message);
  }

  onCancel(cluster: string, handler: (body: unknown) => void): WorkQueueConsumer {
    return followCancels(this.at(), cluster, handler);
  }

  private at(): LaneConsumerAt<T> {
    return { nc: this.nc, prefix: this.prefix, codec: this.codec, ackWaitMs: this.ackWaitMs, health: this.health, ...(this.logger ? { logger: this.logger } : {}) };
  }
}
