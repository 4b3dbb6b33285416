// Commits delivered to a handler from a consumer of the events stream, re-created after a
// failure where the last handled commit left off; `follow` reads through an ordered consumer.
import { DeliverPolicy, type ConsumerMessages, type JetStreamClient, type JsMsg } from "@nats-io/jetstream";
import type { Logger } from "@ephemera/kit";
import { commitOf } from "./commits.js";
import type { NatsHealth } from "./health.js";
import { ConsumerLoop } from "./reopen.js";
import type { Commit, CommitHandler, DeliverAgain, FollowOptions, Subscription } from "./types.js";

/** What a feed needs of a consumer: its messages, and whether it had any left when opened. */
export interface CommitConsumer {
  consume(o?: object): Promise<ConsumerMessages>;
  info(cached?: boolean): Promise<{ num_pending: number; num_ack_pending: number }>;
}

export interface CommitFeed {
  name: string;
  health: NatsHealth;
  logger?: Logger;
  /** The consumer to read from, after the last commit handled (0: none yet). */
  open(after: number): Promise<CommitConsumer>;
  /** The handler resolved (with its answer, if it wants the commit again later). */
  handled(m: JsMsg, again?: DeliverAgain): void;
  /** The handler threw. */
  failed(commit: Commit, m: JsMsg, err: unknown): Promise<void>;
}

/** Opening a consumer failed this many times before it ever read: the subscription fails. */
const OPEN_ATTEMPTS = 6;

export function consumeCommits(feed: CommitFeed, options: FollowOptions, handler: CommitHandler): Subscription {
  let messages: ConsumerMessages | undefined;
  /** The last commit handled: a consumer reopened after a server restart resumes after it. */
  let last = options.from ?? 0;
  let markCaughtUp!: () => void;
  let fail!: (e: unknown) => void;
  const caughtUp = new Promise<void>((resolve, reject) => { markCaughtUp = resolve; fail = reject; });
  caughtUp.catch(() => undefined);
  // A consumer's messages end when the server restarts or the connection drops for long:
  // opened again until stopped. Only failing to open it at first is final.
  const loop = new ConsumerLoop({
    name: feed.name, health: feed.health,
    final: (_err, { opened, failures }) => !opened && failures + 1 >= OPEN_ATTEMPTS,
  }, async (loop) => {
    const consumer = await feed.open(last);
    const info = await consumer.info(true);
    if (info.num_pending === 0 && info.num_ack_pending === 0) markCaughtUp();
    messages = await consumer.consume({ max_messages: 256 });
    if (loop.stopping) {
      // Stopped while opening: close() of an iterator never read does not resolve, so don't wait for it.
      void messages.close().catch(() => undefined);
      return;
    }
    loop.reading();
    for await (const m of messages) {
      // Buffered messages are left unacknowledged on stop: a durable redelivers them.
      if (loop.stopping) break;
      const commit = commitOf(m);
      try {
        feed.handled(m, (await handler(commit)) ?? undefined);
      } catch (err) {
        await feed.failed(commit, m, err);
      }
      last = Math.max(last, m.seq);
      if (m.info.pending === 0) markCaughtUp();
    }
  });
  loop.done.catch((err: unknown) => {
    feed.logger?.error({ err, options }, "subscription ended");
    fail(err);
  });
  return {
    caughtUp,
    stop: async () => {
      loop.stop();
      const opened = messages;
      if (opened) await opened.close();
      await loop.done.catch(() => undefined);
    },
  };
}

/** Every commit from `options.from` (or `since`) through an ordered consumer; a handler that throws is logged and skipped. */
export function followCommits(
  at: { js: JetStreamClient; stream: string; filter: string; name: string; health: NatsHealth; logger?: Logger },
  options: FollowOptions,
  handler: CommitHandler,
): Subscription {
  return consumeCommits({
    name: at.name, health: at.health, ...(at.logger ? { logger: at.logger } : {}),
    open: async (after) => at.js.consumers.get(at.stream, {
      filter_subjects: at.filter,
      ...(after ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: after + 1 }
        : options.since ? { deliver_policy: DeliverPolicy.StartTime, opt_start_time: options.since.toISOString() } : {}),
    }),
    handled: () => undefined,
    failed: async (_commit, m, err) => { at.logger?.error({ err, subject: m.subject, seq: m.seq }, "commit handler failed; skipped"); },
  }, options, handler);
}
