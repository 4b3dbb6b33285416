// The dispatch work queue: one message per step attempt on `<prefix>.run.<lane>.<cluster>`,
// taken by exactly one runner of that cluster, which heartbeats while the step runs and
// acknowledges once the result is recorded. Two lanes: `next` (steps of workflows already
// under way) is always served before `start` (the first steps of a workflow), so a burst
// of new sandboxes does not hold up the ones in progress; each lane is first in, first out. Redelivery is bounded (RedeliveryPolicy):
// an item that keeps failing goes to the consumer's dead-letter hook and is dropped.
// Cancels are durable too: `<prefix>.cancel.<cluster>` in a stream kept for an hour, read
// by every runner of the cluster from a little before it started.
import type { NatsConnection } from "@nats-io/nats-core";
import {
  AckPolicy, DeliverPolicy, ReplayPolicy, RetentionPolicy, StorageType, jetstream, jetstreamManager,
  type Consumer, type ConsumerMessages, type JsMsg, type MsgRequest,
} from "@nats-io/jetstream";
import { UnavailableError, delay, isRetryable, type Logger } from "@ephemera/kit";
import { ensureConsumer, ensureStream } from "./durables.js";
import { natsHealth, type NatsHealth } from "./jetstream.js";
import { backoffFor, redeliveryPolicy, type RedeliveryPolicy } from "./types.js";

export interface WorkItem<T> {
  /** The id it was published under (the run id for dispatches). */
  id: string;
  data: T;
  /** How many times this message has been delivered (1 on first delivery). */
  deliveries: number;
  /** Tells the queue the item is still being worked on. */
  heartbeat(): void;
}

export interface WorkQueueConsumer {
  stop(): Promise<void>;
}

export interface ConsumeOptions<T> {
  concurrency: number;
  redelivery?: Partial<RedeliveryPolicy>;
  /** Called for an item given up on (non-retryable error, or the last delivery failed); it is then dropped. */
  onDeadLetter?: (item: { id: string; data: T; deliveries: number }, err: unknown) => Promise<void>;
}

export interface CancelMessage {
  /** Deduplication id: the same cancel published twice is delivered once. */
  id: string;
  body: unknown;
}

/** `next`: a step of a workflow already under way; `start`: a workflow's first steps. */
export type Lane = "next" | "start";
/** In the order a consumer serves them. */
export const LANES: readonly Lane[] = ["next", "start"];

export interface WorkQueue<T> {
  /** Publishes once per id: a second publish with the same id (within the dedupe window) is dropped. */
  publish(cluster: string, id: string, data: T, lane?: Lane): Promise<void>;
  /**
   * Runs `handler` for each item, at most `concurrency` at once, the `next` lane's first.
   * Acked when it resolves;
   * when it throws, delivered again after a backoff or given up on (see ConsumeOptions).
   * An item whose handler neither ends nor heartbeats within the ack wait is delivered again.
   */
  consume(cluster: string, options: ConsumeOptions<T>, handler: (item: WorkItem<T>) => Promise<void>): WorkQueueConsumer;
  /** Durable: delivered to the cluster's runners running now, and to one that starts within `cancelLookbackMs`. */
  cancel(cluster: string, message: CancelMessage): Promise<void>;
  onCancel(cluster: string, handler: (body: unknown) => void): WorkQueueConsumer;
}

/** A lane's items no runner has been handed yet, and how long the oldest of them has waited. */
export interface LaneBacklog { lane: Lane; pending: number; oldestAgeMs: number }

export interface Codec<T> { encode(d: T): string; decode(s: string): T }

export const runStreamName = (prefix: string) => `${prefix}_run`;
export const laneSubject = (prefix: string, lane: Lane, cluster: string) => `${prefix}.run.${lane}.${cluster}`;
export const cancelStreamName = (prefix: string) => `${prefix}_cancel`;
/** The durable pull consumer the cluster's runners share for one lane. */
const durableName = (cluster: string, lane: Lane) => `runner_${cluster}_${lane}`;
const NANOS_PER_MS = 1_000_000;
/** How far back a runner starting up reads cancels (a run it may be handed was cancelled while it was down). */
export const CANCEL_LOOKBACK_MS = 10 * 60_000;

export interface WorkQueueOptions {
  ackWaitMs?: number;
  /** Replicas of the run and cancel streams when this creates them (EPHEMERA_STREAM_REPLICAS). */
  replicas?: number;
  duplicateWindowMs?: number;
  logger?: Logger;
}

/** Backoff of a loop re-creating its consumer: 250 ms doubling to 5 s. */
const reopenDelay = (failures: number) => Math.min(5000, 250 * 2 ** Math.min(failures, 5));
/** A fetch that neither delivers nor ends within this (its expiry is 1 s) is given up and made again. */
const FETCH_DEADLINE_MS = 15_000;
const REOPEN_TIMEOUT_MS = 3_000;

/** Acks and heartbeats on a closed connection throw: the item is then redelivered, nothing to do here. */
function quietly(f: () => void): void {
  try { f(); } catch { /* connection gone: the server redelivers after the ack wait */ }
}

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
    const policy = redeliveryPolicy(options.redelivery);
    let stopped = false;
    let inFlight = 0;
    const running = new Set<Promise<void>>();
    const work = async (m: JsMsg) => {
      const id = m.headers?.get("Nats-Msg-Id") ?? String(m.seq);
      const deliveries = m.info.deliveryCount;
      let data: T | undefined;
      try {
        data = this.codec.decode(m.string());
        await handler({ id, data, deliveries, heartbeat: () => { progress(); quietly(() => m.working()); } });
        quietly(() => m.ack());
      } catch (err) {
        if (stopped && isRetryable(err)) { quietly(() => m.nak()); return; }
        if (data !== undefined && isRetryable(err) && deliveries < policy.maxDeliver) {
          const delayMs = backoffFor(policy, deliveries);
          this.logger?.warn({ err, id, deliveries, delayMs }, "work item failed; will be redelivered");
          quietly(() => m.nak(delayMs));
          return;
        }
        try {
          await options.onDeadLetter?.({ id, data: data as T, deliveries }, err);
          this.logger?.error({ err, id, deliveries }, "work item given up on; recorded as a dead letter");
          quietly(() => m.term());
        } catch (recordErr) {
          this.logger?.error({ err: recordErr, id }, "cannot record a dead letter; will be redelivered");
          quietly(() => m.nak(backoffFor(policy, deliveries)));
        }
      }
    };
    // Each lane fetches one message at a time into its slot; a free worker takes the `next`
    // lane's before the `start` lane's. The `next` lane keeps its slot filled even while
    // every worker is busy, so a step of a workflow under way is in hand when one frees;
    // the `start` lane fetches only for a free worker, so a busy (or stuck) consumer holds
    // no new workflow back from the others. A message waiting in a slot is heartbeated
    // while this consumer's work makes progress (an item started, heartbeated or ended
    // within the ack wait); past that it is left to be delivered elsewhere.
    let lastProgress = Date.now();
    const progress = () => { lastProgress = Date.now(); };
    const lanes = LANES.map((lane) => ({
      lane, durable: durableName(cluster, lane), prefetch: lane === "next",
      slot: undefined as JsMsg | undefined, beat: undefined as NodeJS.Timeout | undefined,
      wake: undefined as (() => void) | undefined,
    }));
    const schedule = () => {
      while (!stopped && inFlight < options.concurrency) {
        const l = lanes.find((x) => x.slot);
        if (!l) break;
        const m = l.slot!;
        l.slot = undefined;
        clearInterval(l.beat);
        inFlight++;
        progress();
        const p: Promise<void> = work(m)
          .catch((err: unknown) => this.logger?.error({ err, seq: m.seq }, "work item handling failed"))
          .finally(() => { inFlight--; progress(); running.delete(p); schedule(); });
        running.add(p);
      }
      // A slot emptied or a worker freed: the lanes that wait for either fetch again.
      for (const l of lanes) l.wake?.();
    };
    const loops = lanes.map((l) => {
      const name = `work queue ${l.durable}`;
      return (async () => {
        // Every step (creating the consumer, each fetch) can fail while NATS is paused,
        // restarting or unreachable: the loop re-creates the consumer with backoff, for ever.
        let consumer: Consumer | undefined;
        for (let failures = 0; !stopped; ) {
          let deadline: NodeJS.Timeout | undefined;
          try {
            if (!consumer) {
              // Its info answered: the server and the consumer are back, even if no fetch is needed yet.
              consumer = await this.workConsumer(l.durable, laneSubject(this.prefix, l.lane, cluster), policy);
              this.health.restore(name);
            }
            if (l.slot || (!l.prefetch && inFlight >= options.concurrency)) {
              await new Promise<void>((r) => (l.wake = r));
              l.wake = undefined;
              continue;
            }
            const batch = await consumer.fetch({ max_messages: 1, expires: 1000 });
            let overdue = false;
            deadline = setTimeout(() => { overdue = true; void batch.close().catch(() => undefined); }, FETCH_DEADLINE_MS);
            for await (const m of batch) {
              if (stopped) { quietly(() => m.nak()); continue; }
              l.slot = m;
              l.beat = setInterval(() => { if (Date.now() - lastProgress < this.ackWaitMs) quietly(() => m.working()); }, Math.max(100, this.ackWaitMs / 3));
              schedule();
            }
            if (overdue) throw new Error(`a fetch neither delivered nor ended in ${FETCH_DEADLINE_MS} ms`);
            this.health.restore(name);
            failures = 0;
          } catch (err) {
            if (stopped) break;
            // Heartbeats missed, connection closed, consumer or stream not found: make it again.
            this.health.interrupt(name, err);
            consumer = undefined;
            failures++;
            await delay(reopenDelay(failures));
          } finally {
            clearTimeout(deadline);
          }
        }
      })().finally(() => this.health.forget(name));
    });
    return {
      stop: async () => {
        stopped = true;
        for (const l of lanes) {
          l.wake?.();
          clearInterval(l.beat);
          if (l.slot) quietly(() => l.slot!.nak());
          l.slot = undefined;
        }
        await Promise.all(loops.map((loop) => loop.catch(() => undefined)));
        await Promise.allSettled([...running]);
      },
    };
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

  /** The cluster's durable pull consumer, created by the first runner that needs it and brought to this config by every one. */
  private async workConsumer(durable: string, subject: string, policy: RedeliveryPolicy): Promise<Consumer> {
    // A short deadline: a request lost across a server restart is tried again after a backoff, not waited on.
    const jsm = await jetstreamManager(this.nc, { timeout: REOPEN_TIMEOUT_MS });
    const stream = runStreamName(this.prefix);
    await ensureConsumer(jsm, stream, {
      config: {
        durable_name: durable,
        ack_policy: AckPolicy.Explicit,
        ack_wait: this.ackWaitMs * NANOS_PER_MS,
        max_deliver: Number.isFinite(policy.maxDeliver) ? policy.maxDeliver * 2 : -1,
        filter_subject: subject,
        max_ack_pending: 1000,
        replay_policy: ReplayPolicy.Instant,
      },
      start: { deliver_policy: DeliverPolicy.All },
      position: "stream",
    }, this.logger);
    return jetstream(this.nc, { timeout: REOPEN_TIMEOUT_MS }).consumers.get(stream, durable);
  }

  async cancel(cluster: string, message: CancelMessage): Promise<void> {
    try {
      await jetstream(this.nc).publish(`${this.prefix}.cancel.${cluster}`, JSON.stringify(message.body), { msgID: message.id });
    } catch (err) {
      throw new UnavailableError(`cancel ${message.id} to cluster ${cluster} failed`, { cause: err });
    }
  }

  onCancel(cluster: string, handler: (body: unknown) => void): WorkQueueConsumer {
    let messages: ConsumerMessages | undefined;
    let stopped = false;
    let last = 0;
    const name = `cancels of ${cluster}`;
    const loop = (async () => {
      // Reopened after a server restart, from the last cancel seen (or the lookback at first).
      for (let failures = 0; !stopped; ) {
        try {
          const consumer = await jetstream(this.nc).consumers.get(cancelStreamName(this.prefix), {
            filter_subjects: `${this.prefix}.cancel.${cluster}`,
            ...(last
              ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: last + 1 }
              : { deliver_policy: DeliverPolicy.StartTime, opt_start_time: new Date(Date.now() - CANCEL_LOOKBACK_MS).toISOString() }),
          });
          messages = await consumer.consume();
          if (stopped) { void messages.close().catch(() => undefined); return; }
          this.health.restore(name);
          failures = 0;
          for await (const m of messages) {
            last = m.seq;
            try { handler(m.json()); } catch (err) { this.logger?.warn({ err }, "ignoring a malformed cancel message"); }
          }
          if (stopped) return;
          this.health.interrupt(name, new Error("the cancel consumer's messages ended"));
        } catch (err) {
          if (stopped) return;
          this.health.interrupt(name, err);
        }
        failures++;
        await delay(reopenDelay(failures));
      }
    })().finally(() => this.health.forget(name));
    return {
      stop: async () => {
        stopped = true;
        await messages?.close().catch(() => undefined);
        await loop;
      },
    };
  }
}

interface QueuedItem<T> { id: string; data: T; deliveries: number; due: number; lane: Lane }
interface InFlight<T> { item: QueuedItem<T>; deadline: number; settled: boolean }

/**
 * In-memory twin: the same contract without a server. Items wait per cluster, each is
 * handed to one consumer at a time, redelivered with backoff, after the ack wait when its
 * handler goes silent, and dropped (dead letter) after the last delivery.
 */
export class InMemoryWorkQueue<T> implements WorkQueue<T> {
  /** Every accepted publish, in order (for tests that look at what was dispatched). */
  readonly published: Array<{ cluster: string; id: string; data: T; lane: Lane }> = [];
  /** Every accepted cancel, in order. */
  readonly cancels: Array<{ cluster: string; id: string; body: unknown; at: number }> = [];
  private readonly seen = new Map<string, number>();
  private readonly queues = new Map<string, Array<QueuedItem<T>>>();
  private readonly wakers = new Map<string, Set<() => void>>();
  private readonly cancelHandlers = new Map<string, Set<(m: unknown) => void>>();
  private readonly ackWaitMs: number;
  private readonly duplicateWindowMs: number;
  private available = true;

  constructor(options: { ackWaitMs?: number; duplicateWindowMs?: number } = {}) {
    this.ackWaitMs = options.ackWaitMs ?? 30_000;
    this.duplicateWindowMs = options.duplicateWindowMs ?? 2 * 60_000;
  }

  /** Failure injection: while unavailable, publish and cancel reject as they do when NATS is down. */
  setAvailable(available: boolean): void {
    this.available = available;
  }

  async publish(cluster: string, id: string, data: T, lane: Lane = "start"): Promise<void> {
    if (!this.available) throw new UnavailableError(`dispatch ${id} to cluster ${cluster} failed`);
    if (this.duplicate(`run:${id}`)) return;
    this.published.push({ cluster, id, data, lane });
    this.queue(cluster).push({ id, data, deliveries: 0, due: 0, lane });
    this.wake(cluster);
  }

  consume(cluster: string, options: ConsumeOptions<T>, handler: (item: WorkItem<T>) => Promise<void>): WorkQueueConsumer {
    const policy = redeliveryPolicy(options.redelivery);
    const queue = this.queue(cluster);
    const running = new Set<Promise<void>>();
    const inFlight = new Set<InFlight<T>>();
    let stopped = false;
    let wake: (() => void) | undefined;
    const wakeUp = () => wake?.();
    let wakers = this.wakers.get(cluster);
    if (!wakers) this.wakers.set(cluster, (wakers = new Set()));
    wakers.add(wakeUp);
    // A silent handler loses its item after the ack wait, as JetStream's does.
    const sweep = setInterval(() => {
      const now = Date.now();
      for (const f of inFlight) {
        if (f.settled || f.deadline > now) continue;
        f.settled = true;
        inFlight.delete(f);
        queue.push({ ...f.item, due: 0 });
        this.wake(cluster);
      }
    }, Math.max(10, Math.min(this.ackWaitMs / 4, 1000)));
    sweep.unref();
    const settle = (f: InFlight<T>, then: () => void) => { if (!f.settled) { f.settled = true; inFlight.delete(f); then(); } };
    const work = async (item: QueuedItem<T>) => {
      const deliveries = item.deliveries + 1;
      const f: InFlight<T> = { item: { ...item, deliveries }, deadline: Date.now() + this.ackWaitMs, settled: false };
      inFlight.add(f);
      try {
        await handler({ id: item.id, data: item.data, deliveries, heartbeat: () => { f.deadline = Date.now() + this.ackWaitMs; } });
        settle(f, () => undefined);
      } catch (err) {
        if (f.settled) return;
        if ((stopped && isRetryable(err)) || (isRetryable(err) && deliveries < policy.maxDeliver)) {
          settle(f, () => { queue.push({ ...f.item, due: stopped ? 0 : Date.now() + backoffFor(policy, deliveries) }); });
          return;
        }
        try {
          await options.onDeadLetter?.({ id: item.id, data: item.data, deliveries }, err);
          settle(f, () => undefined);
        } catch {
          settle(f, () => { queue.push({ ...f.item, due: Date.now() + backoffFor(policy, deliveries) }); });
        }
      } finally {
        this.wake(cluster);
      }
    };
    const take = (): QueuedItem<T> | number | undefined => {
      const now = Date.now();
      const due = (lane: Lane) => queue.findIndex((q) => q.due <= now && q.lane === lane);
      const i = LANES.map(due).find((x) => x >= 0) ?? -1;
      if (i >= 0) return queue.splice(i, 1)[0];
      return queue.length ? Math.min(...queue.map((q) => q.due)) - now : undefined;
    };
    const loop = (async () => {
      while (!stopped) {
        const next = running.size < options.concurrency ? take() : undefined;
        if (next === undefined || typeof next === "number") {
          await new Promise<void>((r) => {
            wake = r;
            if (typeof next === "number") setTimeout(r, Math.max(1, next)).unref();
          });
          wake = undefined;
          continue;
        }
        const p: Promise<void> = work(next).finally(() => { running.delete(p); wake?.(); });
        running.add(p);
      }
    })();
    return {
      stop: async () => {
        stopped = true;
        wakers.delete(wakeUp);
        wake?.();
        await loop;
        await Promise.allSettled([...running]);
        clearInterval(sweep);
      },
    };
  }

  async cancel(cluster: string, message: CancelMessage): Promise<void> {
    if (!this.available) throw new UnavailableError(`cancel ${message.id} to cluster ${cluster} failed`);
    if (this.duplicate(`cancel:${message.id}`)) return;
    this.cancels.push({ cluster, id: message.id, body: message.body, at: Date.now() });
    for (const h of this.cancelHandlers.get(cluster) ?? []) h(message.body);
  }

  onCancel(cluster: string, handler: (body: unknown) => void): WorkQueueConsumer {
    let set = this.cancelHandlers.get(cluster);
    if (!set) this.cancelHandlers.set(cluster, (set = new Set()));
    const since = Date.now() - CANCEL_LOOKBACK_MS;
    for (const c of this.cancels) if (c.cluster === cluster && c.at >= since) handler(c.body);
    set.add(handler);
    return { stop: async () => { set.delete(handler); } };
  }

  private duplicate(key: string): boolean {
    const now = Date.now();
    const at = this.seen.get(key);
    if (at !== undefined && now - at < this.duplicateWindowMs) return true;
    this.seen.set(key, now);
    return false;
  }

  private queue(cluster: string): Array<QueuedItem<T>> {
    let q = this.queues.get(cluster);
    if (!q) this.queues.set(cluster, (q = []));
    return q;
  }

  private wake(cluster: string): void {
    for (const w of this.wakers.get(cluster) ?? []) w();
  }
}
