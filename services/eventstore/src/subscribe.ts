// Durable subscriptions to the events stream: a named consumer brought to the declared
// config, each commit acknowledged once handled, a failed one delivered again with backoff
// or, past its last delivery, recorded as a dead letter.
import { AckPolicy, DeliverPolicy, ReplayPolicy, type JetStreamClient, type JetStreamManager, type JsMsg } from "@nats-io/jetstream";
import { isRetryable, type Logger } from "@ephemera/kit";
import { deadLetter, recordDeadLetter } from "./deadletter.js";
import { ensureConsumer } from "./durables.js";
import { consumeCommits } from "./follow.js";
import type { NatsHealth } from "./health.js";
import type { Commit, CommitHandler, DurableOptions, EventStore, RedeliveryPolicy, Subscription } from "./types.js";
import { backoffFor, redeliveryPolicy } from "./types.js";

export interface DurableAt {
  js: JetStreamClient;
  jsm: JetStreamManager;
  stream: string;
  prefix: string;
  filter: string;
  health: NatsHealth;
  /** Where dead letters are recorded. */
  store: EventStore;
  logger?: Logger;
}

export function subscribeCommits(at: DurableAt, options: DurableOptions, handler: CommitHandler): Subscription {
  const name = `${at.prefix}_${options.durable}`;
  const policy = redeliveryPolicy(options.redelivery);
  return consumeCommits({
    name: `subscription ${options.durable}`, health: at.health, ...(at.logger ? { logger: at.logger } : {}),
    open: async () => {
      await ensureConsumer(at.jsm, at.stream, {
        config: {
          durable_name: name,
          ack_policy: AckPolicy.Explicit,
          ack_wait: 30 * 1_000_000_000,
          // The server's own bound, for a handler that hangs past ack_wait every time; room is
          // left above ours for the deliveries that retry recording a dead letter.
          max_deliver: Number.isFinite(policy.maxDeliver) ? policy.maxDeliver * 2 : -1,
          filter_subject: at.filter,
          replay_policy: ReplayPolicy.Instant,
        },
        start: options.from
          ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: options.from + 1 }
          : { deliver_policy: DeliverPolicy.All },
        position: "ack-floor",
      }, at.logger);
      return at.js.consumers.get(at.stream, name);
    },
    // Wanted again later: a nak with that delay (the server counts it as a delivery, as a failed one).
    handled: (m, again) => (again ? m.nak(Math.max(1, again.againInMs)) : m.ack()),
    failed: (commit, m, err) => failed(at, { durable: options.durable, policy }, commit, m, err),
  }, options, handler);
}

/** A failed delivery: again later (nak with backoff), or a dead letter (recorded, then term). */
async function failed(at: DurableAt, durable: { durable: string; policy: RedeliveryPolicy }, commit: Commit, m: JsMsg, err: unknown): Promise<void> {
  const deliveries = m.info.deliveryCount;
  const log = at.logger;
  if (isRetryable(err) && deliveries < durable.policy.maxDeliver) {
    const delayMs = backoffFor(durable.policy, deliveries);
    log?.warn({ err, consumer: durable.durable, subject: m.subject, seq: m.seq, deliveries, delayMs }, "commit handler failed; will redeliver");
    m.nak(delayMs);
    return;
  }
  const letter = deadLetter(durable.durable, {
    aggregate: commit.aggregate, aggregateId: commit.aggregateId, position: commit.position, types: commit.events.map((e) => e.type),
  }, deliveries, err);
  try {
    await recordDeadLetter(at.store, letter);
  } catch (recordErr) {
    // Not recorded: keep the commit (delivered again later) rather than lose it silently.
    log?.error({ err: recordErr, consumer: durable.durable, seq: m.seq }, "cannot record a dead letter; will redeliver");
    m.nak(backoffFor(durable.policy, deliveries));
    return;
  }
  log?.error({ err, consumer: durable.durable, subject: m.subject, seq: m.seq, deliveries }, "commit handler gave up; recorded as a dead letter");
  m.term();
}
