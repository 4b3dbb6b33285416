// Consuming the work queue: per lane, a durable pull consumer shared by the cluster's runners,
// fetched one message at a time, the `next` lane's served first, redelivered or dead-lettered on failure.
import type { NatsConnection } from "@nats-io/nats-core";
import { AckPolicy, DeliverPolicy, ReplayPolicy, jetstream, jetstreamManager, type Consumer, type JsMsg } from "@nats-io/jetstream";
import { isRetryable, type Logger } from "@ephemera/kit";
import { ensureConsumer } from "./durables.js";
import type { NatsHealth } from "./health.js";
import { ConsumerLoop } from "./reopen.js";
import { backoffFor, redeliveryPolicy, type RedeliveryPolicy } from "./types.js";
import { LANES, laneSubject, runStreamName, type Codec, type ConsumeOptions, type Lane, type WorkItem, type WorkQueueConsumer } from "./workqueue.js";

/** The durable pull consumer the cluster's runners share for one lane. */
export const durableName = (cluster: string, lane: Lane) => `runner_${cluster}_${lane}`;
const NANOS_PER_MS = 1_000_000;
/** A fetch that neither delivers nor ends within this (its expiry is 1 s) is given up and made again. */
const FETCH_DEADLINE_MS = 15_000;
/** A request lost across a server restart is tried again after a backoff, not waited on. */
export const REOPEN_TIMEOUT_MS = 3_000;

export interface LaneConsumerAt<T> {
  nc: NatsConnection;
  prefix: string;
  codec: Codec<T>;
  ackWaitMs: number;
  health: NatsHealth;
  logger?: Logger;
}

/** Acks and heartbeats on a closed connection throw: the item is then redelivered, nothing to do here. */
function quietly(f: () => void): void {
  try { f(); } catch { /* connection gone: the server redelivers after the ack wait */ }
}

export function consumeLanes<T>(at: LaneConsumerAt<T>, cluster: string, options: ConsumeOptions<T>, handler: (item: WorkItem<T>) => Promise<void>): WorkQueueConsumer {
  const policy = redeliveryPolicy(options.redelivery);
  let stopped = false;
  let inFlight = 0;
  const running = new Set<Promise<void>>();
  const work = async (m: JsMsg) => {
    const id = m.headers?.get("Nats-Msg-Id") ?? String(m.seq);
    const deliveries = m.info.deliveryCount;
    let data: T | undefined;
    try {
      data = at.codec.decode(m.string());
      await handler({ id, data, deliveries, heartbeat: () => { progress(); quietly(() => m.working()); } });
      quietly(() => m.ack());
    } catch (err) {
      if (stopped && isRetryable(err)) { quietly(() => m.nak()); return; }
      if (data !== undefined && isRetryable(err) && deliveries < policy.maxDeliver) {
        const delayMs = backoffFor(policy, deliveries);
        at.logger?.warn({ err, id, deliveries, delayMs }, "work item failed; will be redelivered");
        quietly(() => m.nak(delayMs));
        return;
      }
      try {
        await options.onDeadLetter?.({ id, data: data as T, deliveries }, err);
        at.logger?.error({ err, id, deliveries }, "work item given up on; recorded as a dead letter");
        quietly(() => m.term());
      } catch (recordErr) {
        at.logger?.error({ err: recordErr, id }, "cannot record a dead letter; will be redelivered");
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
        .catch((err: unknown) => at.logger?.error({ err, seq: m.seq }, "work item handling failed"))
        .finally(() => { inFlight--; progress(); running.delete(p); schedule(); });
      running.add(p);
    }
    // A slot emptied or a worker freed: the lanes that wait for either fetch again.
    for (const l of lanes) l.wake?.();
  };
  const loops = lanes.map((l) => new ConsumerLoop({ name: `work queue ${l.durable}`, health: at.health }, async (loop) => {
    // Every step (creating the consumer, each fetch) can fail while NATS is paused,
    // restarting or unreachable: the loop re-creates the consumer with backoff, for ever.
    // Its info answered: the server and the consumer are back, even if no fetch is needed yet.
    const consumer = await workConsumer(at, l.durable, laneSubject(at.prefix, l.lane, cluster), policy);
    loop.reading();
    while (!loop.stopping) {
      if (l.slot || (!l.prefetch && inFlight >= options.concurrency)) {
        await new Promise<void>((r) => (l.wake = r));
        l.wake = undefined;
        continue;
      }
      const batch = await consumer.fetch({ max_messages: 1, expires: 1000 });
      let overdue = false;
      const deadline = setTimeout(() => { overdue = true; void batch.close().catch(() => undefined); }, FETCH_DEADLINE_MS);
      try {
        for await (const m of batch) {
          if (stopped) { quietly(() => m.nak()); continue; }
          l.slot = m;
          l.beat = setInterval(() => { if (Date.now() - lastProgress < at.ackWaitMs) quietly(() => m.working()); }, Math.max(100, at.ackWaitMs / 3));
          schedule();
        }
      } finally {
        clearTimeout(deadline);
      }
      // Heartbeats missed, connection closed, consumer or stream not found: the loop makes it again.
      if (overdue) throw new Error(`a fetch neither delivered nor ended in ${FETCH_DEADLINE_MS} ms`);
      loop.reading();
    }
  }));
  return {
    stop: async () => {
      stopped = true;
      for (const loop of loops) loop.stop();
      for (const l of lanes) {
        l.wake?.();
        clearInterval(l.beat);
        if (l.slot) quietly(() => l.slot!.nak());
        l.slot = undefined;
      }
      await Promise.all(loops.map((loop) => loop.done.catch(() => undefined)));
      await Promise.allSettled([...running]);
    },
  };
}

/** The cluster's durable pull consumer, created by the first runner that needs it and brought to this config by every one. */
async function workConsumer<T>(at: LaneConsumerAt<T>, durable: string, subject: string, policy: RedeliveryPolicy): Promise<Consumer> {
  // A short deadline: a request lost across a server restart is tried again after a backoff, not waited on.
  const jsm = await jetstreamManager(at.nc, { timeout: REOPEN_TIMEOUT_MS });
  const stream = runStreamName(at.prefix);
  await ensureConsumer(jsm, stream, {
    config: {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      ack_wait: at.ackWaitMs * NANOS_PER_MS,
      max_deliver: Number.isFinite(policy.maxDeliver) ? policy.maxDeliver * 2 : -1,
      filter_subject: subject,
      max_ack_pending: 1000,
      replay_policy: ReplayPolicy.Instant,
    },
    start: { deliver_policy: DeliverPolicy.All },
    position: "stream",
  }, at.logger);
  return jetstream(at.nc, { timeout: REOPEN_TIMEOUT_MS }).consumers.get(stream, durable);
}
