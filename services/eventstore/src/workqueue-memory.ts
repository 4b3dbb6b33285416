// The work queue in memory: the same contract as the JetStream one, for tests and a single process.
import { UnavailableError, isRetryable } from "@ephemera/kit";
import { backoffFor, redeliveryPolicy } from "./types.js";
import {
  CANCEL_LOOKBACK_MS, LANES, type CancelMessage, type ConsumeOptions, type Lane, type WorkItem, type WorkQueue, type WorkQueueConsumer,
} from "./workqueue.js";

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
