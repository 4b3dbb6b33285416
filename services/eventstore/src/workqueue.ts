// The dispatch work queue's contract: what is published, consumed and cancelled, and under which names.
// One message per step attempt on `<prefix>.run.<lane>.<cluster>`,
// taken by exactly one runner of that cluster, which heartbeats while the step runs and
// acknowledges once the result is recorded. Two lanes: `next` (steps of workflows already
// under way) is always served before `start` (the first steps of a workflow), so a burst
// of new sandboxes does not hold up the ones in progress; each lane is first in, first out. Redelivery is bounded (RedeliveryPolicy):
// an item that keeps failing goes to the consumer's dead-letter hook and is dropped.
// Cancels are durable too: `<prefix>.cancel.<cluster>` in a stream kept for an hour, read
// by every runner of the cluster from a little before it started.
// Publish and streams: workqueue-jetstream.ts; consuming: workqueue-consume.ts; cancels:
// cancels.ts; the in-memory twin: workqueue-memory.ts.
import type { Logger } from "@ephemera/kit";
import type { RedeliveryPolicy } from "./types.js";

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
/** How far back a runner starting up reads cancels (a run it may be handed was cancelled while it was down). */
export const CANCEL_LOOKBACK_MS = 10 * 60_000;

export interface WorkQueueOptions {
  ackWaitMs?: number;
  /** Replicas of the run and cancel streams when this creates them (EPHEMERA_STREAM_REPLICAS). */
  replicas?: number;
  duplicateWindowMs?: number;
  logger?: Logger;
}

