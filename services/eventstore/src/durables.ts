// Durable consumers and streams brought to the config the code declares. JetStream keeps a
// durable's config from when it was made: without this, a consumer created by an older
// version of ephemera (an outbox with max_deliver 40, say) would keep its old settings for
// ever. Checked each time one is opened: made when missing, updated in place where
// JetStream allows the field to change, recreated where it does not (consumers only).
import {
  DeliverPolicy, JetStreamApiError,
  type ConsumerConfig, type ConsumerInfo, type JetStreamManager, type StreamConfig, type StreamInfo,
} from "@nats-io/jetstream";
import { ConflictError, type Logger } from "@ephemera/kit";

const CONSUMER_NOT_FOUND = 10014;
const STREAM_NOT_FOUND = 10059;
/** Made by another process between our look and our add, or changed under us: look again. */
const ATTEMPTS = 3;

/** Consumer fields JetStream refuses to change in place ("... can not be updated"). */
const CONSUMER_FIXED = new Set<string>([
  "ack_policy", "deliver_policy", "opt_start_seq", "opt_start_time", "replay_policy", "deliver_subject", "deliver_group",
  "flow_control", "idle_heartbeat", "durable_name", "name",
]);
/** Stream fields JetStream refuses to change in place; a stream is never recreated for them. */
const STREAM_FIXED = new Set<string>(["name", "storage", "retention"]);

/** Where a recreated consumer starts, so that nothing it had not finished is lost. */
export type ConsumerPosition =
  /**
   * A work-queue stream holds the position itself: an acknowledged message is removed, so
   * every message still in the stream (pending, or handed out and not yet acknowledged) is
   * delivered by the new consumer from the stream's start. An item in hand when the old
   * consumer went is delivered again, as after an ack wait.
   */
  | "stream"
  /**
   * A limits stream keeps what was acknowledged: the new consumer starts right after the
   * old one's ack floor. Commits acknowledged past the floor (out of order) are delivered
   * again, which an at-least-once handler already tolerates; none is skipped.
   */
  | "ack-floor";

export interface DeclaredConsumer {
  /** Compared with the server's at every open, and brought to it. */
  config: Partial<ConsumerConfig> & { durable_name: string };
  /** Where a consumer made now starts (deliver_policy, opt_start_seq…): used on creation only. */
  start?: Partial<ConsumerConfig>;
  position: ConsumerPosition;
}

/** A field the server held differently from what is declared. */
export type Changes = Record<string, { from: unknown; to: unknown }>;

/**
 * The durable consumer `declared.config.durable_name` on `stream`, with the declared
 * config: created when missing, updated in place when every changed field may change,
 * otherwise deleted and recreated from `declared.position`. Each change is logged once
 * (info), naming the consumer and the fields.
 *
 * Two processes opening the same consumer at once both converge on the declared config; if
 * both recreate it, the second one's start is the ack floor the first saw, so commits may be
 * delivered again but none is lost.
 */
export async function ensureConsumer(
  jsm: JetStreamManager, stream: string, declared: DeclaredConsumer, logger?: Logger,
): Promise<ConsumerInfo> {
  const name = declared.config.durable_name;
  for (let attempt = 1; ; attempt++) {
    try {
      const info = await consumerInfo(jsm, stream, name);
      if (!info) return await jsm.consumers.add(stream, { ...declared.start, ...declared.config } as ConsumerConfig);
      const changes = differences(info.config, declared.config);
      const fields = Object.keys(changes);
      if (fields.length === 0) return info;
      if (!fields.some((f) => CONSUMER_FIXED.has(f))) {
        try {
          const updated = await jsm.consumers.update(stream, name, pick(declared.config, fields));
          logger?.info({ stream, consumer: name, changes }, "durable consumer updated to its declared config");
          return updated;
        } catch (err) {
          // This server refuses a field newer ones accept: recreated like a fixed one.
          if (!(err instanceof JetStreamApiError)) throw err;
          logger?.info(
            { stream, consumer: name, fields, reason: err.message },
            "durable consumer cannot be updated in place; recreating it",
          );
        }
      }
      const start = restartAt(info, declared);
      await jsm.consumers.delete(stream, name);
      const made = await jsm.consumers.add(stream, { ...start, ...declared.config } as ConsumerConfig);
      logger?.info({ stream, consumer: name, changes, start }, "durable consumer recreated with its declared config");
      return made;
    } catch (err) {
      if (!(err instanceof JetStreamApiError) || attempt >= ATTEMPTS) throw err;
    }
  }
}

/** Where the replacement of `old` starts (see ConsumerPosition). */
function restartAt(old: ConsumerInfo, declared: DeclaredConsumer): Partial<ConsumerConfig> {
  if (declared.position === "stream") return { deliver_policy: DeliverPolicy.All };
  // After the ack floor; one that acknowledged nothing yet starts where the old one was made to.
  const floor = Math.max(old.ack_floor.stream_seq, (old.config.opt_start_seq ?? 1) - 1);
  return floor > 0 ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: floor + 1 } : { ...declared.start };
}

export interface DeclaredStream {
  config: Partial<StreamConfig> & { name: string };
  /** Fields used when the stream is made, and left as they are on an existing one. */
  createOnly?: Array<keyof StreamConfig>;
}

/**
 * The stream `declared.config.name` with the declared config: created when missing,
 * updated in place when a declared limit differs. A stream is never recreated (its messages
 * would go): a declared field JetStream cannot change (storage, retention) is an error that
 * names it (a ConflictError: retrying cannot help).
 */
export async function ensureStream(jsm: JetStreamManager, declared: DeclaredStream, logger?: Logger): Promise<StreamInfo> {
  const name = declared.config.name;
  for (let attempt = 1; ; attempt++) {
    try {
      const info = await streamInfo(jsm, name);
      if (!info) return await jsm.streams.add(declared.config);
      const kept = new Set<string>(declared.createOnly ?? []);
      const compared = Object.fromEntries(Object.entries(declared.config).filter(([k]) => !kept.has(k)));
      const changes = differences(info.config, compared);
      const fields = Object.keys(changes);
      if (fields.length === 0) return info;
      const fixed = fields.filter((f) => STREAM_FIXED.has(f));
      if (fixed.length) {
        const what = fixed.map((f) => `${f} is ${String(changes[f]?.from)}, declared ${String(changes[f]?.to)}`);
        throw new ConflictError(`stream ${name}: ${what.join("; ")}; `
          + "JetStream cannot change it in place and ephemera does not recreate a stream (its messages would be lost)");
      }
      const updated = await jsm.streams.update(name, { ...info.config, ...pick(compared, fields) });
      logger?.info({ stream: name, changes }, "stream updated to its declared config");
      return updated;
    } catch (err) {
      if (!(err instanceof JetStreamApiError) || attempt >= ATTEMPTS) throw err;
    }
  }
}

async function consumerInfo(jsm: JetStreamManager, stream: string, name: string): Promise<ConsumerInfo | undefined> {
  try {
    return await jsm.consumers.info(stream, name);
  } catch (err) {
    if (err instanceof JetStreamApiError && err.code === CONSUMER_NOT_FOUND) return undefined;
    throw err;
  }
}

async function streamInfo(jsm: JetStreamManager, name: string): Promise<StreamInfo | undefined> {
  try {
    return await jsm.streams.info(name);
  } catch (err) {
    if (err instanceof JetStreamApiError && err.code === STREAM_NOT_FOUND) return undefined;
    throw err;
  }
}

/** The declared fields whose value on the server differs (an absent one counts as different). */
export function differences(actual: object, declared: object): Changes {
  const held = actual as Record<string, unknown>;
  const changes: Changes = {};
  for (const [field, to] of Object.entries(declared)) {
    if (to === undefined) continue;
    if (JSON.stringify(held[field]) !== JSON.stringify(to)) changes[field] = { from: held[field], to };
  }
  return changes;
}

function pick<T extends object>(o: T, fields: string[]): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([k]) => fields.includes(k))) as Partial<T>;
}
