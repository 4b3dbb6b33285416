// Cancels: published once per id to `<prefix>.cancel.<cluster>`, read by every runner of the
// cluster from CANCEL_LOOKBACK_MS before it started, through an ordered consumer re-created after a failure.
import type { NatsConnection } from "@nats-io/nats-core";
import { DeliverPolicy, jetstream, type ConsumerMessages } from "@nats-io/jetstream";
import { UnavailableError, type Logger } from "@ephemera/kit";
import type { NatsHealth } from "./health.js";
import { ConsumerLoop } from "./reopen.js";
import { CANCEL_LOOKBACK_MS, cancelStreamName, type CancelMessage, type WorkQueueConsumer } from "./workqueue.js";

export interface CancelsAt {
  nc: NatsConnection;
  prefix: string;
  health: NatsHealth;
  logger?: Logger;
}

export async function publishCancel(at: CancelsAt, cluster: string, message: CancelMessage): Promise<void> {
  try {
    await jetstream(at.nc).publish(`${at.prefix}.cancel.${cluster}`, JSON.stringify(message.body), { msgID: message.id });
  } catch (err) {
    throw new UnavailableError(`cancel ${message.id} to cluster ${cluster} failed`, { cause: err });
  }
}

export function followCancels(at: CancelsAt, cluster: string, handler: (body: unknown) => void): WorkQueueConsumer {
  let messages: ConsumerMessages | undefined;
  let last = 0;
  // Reopened after a server restart, from the last cancel seen (or the lookback at first).
  const loop = new ConsumerLoop({ name: `cancels of ${cluster}`, health: at.health }, async (loop) => {
    const consumer = await jetstream(at.nc).consumers.get(cancelStreamName(at.prefix), {
      filter_subjects: `${at.prefix}.cancel.${cluster}`,
      ...(last
        ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: last + 1 }
        : { deliver_policy: DeliverPolicy.StartTime, opt_start_time: new Date(Date.now() - CANCEL_LOOKBACK_MS).toISOString() }),
    });
    messages = await consumer.consume();
    if (loop.stopping) { void messages.close().catch(() => undefined); return; }
    loop.reading();
    for await (const m of messages) {
      last = m.seq;
      try { handler(m.json()); } catch (err) { at.logger?.warn({ err }, "ignoring a malformed cancel message"); }
    }
  });
  return {
    stop: async () => {
      loop.stop();
      await messages?.close().catch(() => undefined);
      await loop.done;
    },
  };
}
