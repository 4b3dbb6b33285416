// Durables made by an older version, met by this one at open: brought to the declared
// config, and nothing they held is lost.
import type { NatsConnection } from "@nats-io/nats-core";
import { AckPolicy, DeliverPolicy, ReplayPolicy, RetentionPolicy, StorageType, jetstream, jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { createLogger, waitFor, type Logger } from "@ephemera/kit";
import { connectNats } from "./connection.js";
import { eventStreamName, eventSubject, JetStreamEventStore } from "./jetstream.js";
import { laneSubject, runStreamName, type WorkQueueConsumer } from "./workqueue.js";
import { JetStreamWorkQueue } from "./workqueue-jetstream.js";
import type { Commit, Subscription } from "./types.js";
import { testNats } from "../../../test/support/servers.js";

const SECOND = 1_000_000_000;
const codec = { encode: (d: { n: number }) => JSON.stringify(d), decode: (s: string) => JSON.parse(s) as { n: number } };

interface Line { level: number; msg: string; consumer?: string; stream?: string; changes?: Record<string, { from: unknown; to: unknown }> }

function loggedLines(): { logger: Logger; lines: Line[] } {
  const lines: Line[] = [];
  return { logger: createLogger("test", "info", { write: (s: string) => { lines.push(JSON.parse(s) as Line); } }), lines };
}

describe("durables made by an older version", () => {
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let prefix: string;
  let cleanup: (nc: NatsConnection) => Promise<void>;
  const stops: Array<() => Promise<void>> = [];

  beforeEach(async () => {
    ({ prefix, cleanup } = testNats("dur"));
    nc = await connectNats(testNats().url, "durables");
    jsm = await jetstreamManager(nc);
  });
  afterEach(async () => {
    for (const stop of stops.splice(0)) await stop();
    await cleanup(nc);
    await nc.close();
  });

  const consume = (queue: JetStreamWorkQueue<{ n: number }>, handled: number[]): WorkQueueConsumer => {
    const c = queue.consume("c1", { concurrency: 4 }, async (item) => { handled.push(item.data.n); });
    stops.push(() => c.stop());
    return c;
  };

  it("a work-queue consumer with an old max_deliver and ack wait is updated in place, its queued items all handed out", async () => {
    const { logger, lines } = loggedLines();
    const queue = await JetStreamWorkQueue.open(nc, prefix, codec, { ackWaitMs: 2000, logger });
    const durable = "runner_c1_start";
    await jsm.consumers.add(runStreamName(prefix), {
      durable_name: durable, ack_policy: AckPolicy.Explicit, ack_wait: 60 * SECOND, max_deliver: 40, filter_subject: laneSubject(prefix, "start", "c1"),
    });
    for (const n of [1, 2, 3]) await queue.publish("c1", `item-${n}`, { n });

    const handled: number[] = [];
    consume(queue, handled);
    await waitFor(() => handled.length === 3, { what: "the three queued items handled" });

    expect(handled.sort()).toEqual([1, 2, 3]);
    const config = (await jsm.consumers.info(runStreamName(prefix), durable)).config;
    expect({ ack_wait: config.ack_wait, max_deliver: config.max_deliver }).toEqual({ ack_wait: 2 * SECOND, max_deliver: 16 });
    const told = lines.filter((l) => l.consumer === durable && l.level === 30);
    expect(told.map((l) => [l.msg, Object.keys(l.changes ?? {}).sort()])).toEqual([
      ["durable consumer updated to its declared config", ["ack_wait", "max_deliver"]],
    ]);
  });

  it("a work-queue consumer with a field JetStream cannot update is recreated: the items queued, and the one an old runner held, are all handed out", async () => {
    const { logger, lines } = loggedLines();
    const queue = await JetStreamWorkQueue.open(nc, prefix, codec, { ackWaitMs: 2000, logger });
    const durable = "runner_c1_start";
    await jsm.consumers.add(runStreamName(prefix), {
      durable_name: durable, ack_policy: AckPolicy.Explicit, ack_wait: 60 * SECOND, max_deliver: 40,
      filter_subject: laneSubject(prefix, "start", "c1"), replay_policy: ReplayPolicy.Original,
    });
    for (const n of [1, 2, 3, 4]) await queue.publish("c1", `item-${n}`, { n });
    // An old runner holds the first item and never acknowledges it.
    const held = await jetstream(nc).consumers.get(runStreamName(prefix), durable).then((c) => c.next({ expires: 2000 }));
    expect(held?.json()).toEqual({ n: 1 });

    const handled: number[] = [];
    consume(queue, handled);
    await waitFor(() => handled.length === 4, { what: "the four queued items handled" });

    expect(handled.sort()).toEqual([1, 2, 3, 4]);
    const info = await jsm.consumers.info(runStreamName(prefix), durable);
    expect({ replay_policy: info.config.replay_policy, ack_wait: info.config.ack_wait, max_deliver: info.config.max_deliver })
      .toEqual({ replay_policy: ReplayPolicy.Instant, ack_wait: 2 * SECOND, max_deliver: 16 });
    await waitFor(async () => (await jsm.streams.info(runStreamName(prefix))).state.messages === 0, { what: "every item acknowledged, so gone from the stream" });
    const told = lines.filter((l) => l.consumer === durable && l.msg === "durable consumer recreated with its declared config");
    expect(told.map((l) => Object.keys(l.changes ?? {}).sort())).toEqual([["ack_wait", "max_deliver", "replay_policy"]]);
  });

  describe("an event-store durable", () => {
    const meta = { source: "test" };
    const subscribe = (store: JetStreamEventStore, seen: Commit[], maxDeliver = Infinity): Subscription => {
      const s = store.subscribe({ durable: "outbox", aggregate: "workflow", redelivery: { maxDeliver } }, (c) => { seen.push(c); });
      stops.push(() => s.stop());
      return s;
    };
    const appendFive = async (store: JetStreamEventStore) => {
      for (let i = 1; i <= 5; i++) await store.append("workflow", `w${i}`, { revision: 0, version: 0 }, [{ type: "t", data: { i } }], meta);
    };

    it("made before the max_deliver fix (40, another ack wait) is updated in place and delivers what was pending", async () => {
      const { logger, lines } = loggedLines();
      const store = await JetStreamEventStore.open(nc, { prefix, logger });
      const durable = `${prefix}_outbox`;
      await jsm.consumers.add(eventStreamName(prefix), {
        durable_name: durable, ack_policy: AckPolicy.Explicit, ack_wait: 60 * SECOND, max_deliver: 40,
        filter_subject: `${prefix}.ev.workflow.>`, deliver_policy: DeliverPolicy.All,
      });
      await appendFive(store);

      const seen: Commit[] = [];
      await subscribe(store, seen).caughtUp;
      await waitFor(() => seen.length === 5, { what: "the five pending commits" });

      const config = (await jsm.consumers.info(eventStreamName(prefix), durable)).config;
      expect({ ack_wait: config.ack_wait, max_deliver: config.max_deliver }).toEqual({ ack_wait: 30 * SECOND, max_deliver: -1 });
      expect(lines.filter((l) => l.consumer === durable).map((l) => [l.msg, l.changes])).toEqual([
        ["durable consumer updated to its declared config", { ack_wait: { from: 60 * SECOND, to: 30 * SECOND }, max_deliver: { from: 40, to: -1 } }],
      ]);
    });

    it("with an ack policy JetStream cannot update is recreated after its ack floor: nothing acknowledged again, nothing after it lost", async () => {
      const { logger, lines } = loggedLines();
      const store = await JetStreamEventStore.open(nc, { prefix, logger });
      const durable = `${prefix}_outbox`;
      await jsm.consumers.add(eventStreamName(prefix), {
        durable_name: durable, ack_policy: AckPolicy.All, ack_wait: 30 * SECOND, max_deliver: -1,
        filter_subject: `${prefix}.ev.workflow.>`, deliver_policy: DeliverPolicy.All,
      });
      await appendFive(store);
      // The old version handled the first two (acknowledging the second acknowledges both).
      const old = await jetstream(nc).consumers.get(eventStreamName(prefix), durable);
      await old.next({ expires: 2000 });
      const second = await old.next({ expires: 2000 });
      await second!.ackAck();

      const seen: Commit[] = [];
      await subscribe(store, seen).caughtUp;
      await waitFor(() => seen.length === 3, { what: "the three commits after the ack floor" });

      expect(seen.map((c) => c.aggregateId)).toEqual(["w3", "w4", "w5"]);
      const info = await jsm.consumers.info(eventStreamName(prefix), durable);
      expect(info.config.ack_policy).toBe(AckPolicy.Explicit);
      expect(lines.filter((l) => l.consumer === durable && l.level === 30).map((l) => l.msg)).toEqual([
        "durable consumer recreated with its declared config",
      ]);
      // Opened again (a restart): already as declared, nothing changed or told.
      await stops.pop()!();
      const again: Commit[] = [];
      await subscribe(store, again).caughtUp;
      expect(lines.filter((l) => l.consumer === durable && l.level === 30)).toHaveLength(1);
      expect(again).toEqual([]);
    });
  });

  describe("streams", () => {
    it("an events stream with another deduplication window is brought to the declared one, its commits kept", async () => {
      await jsm.streams.add({ name: eventStreamName(prefix), subjects: [`${prefix}.ev.>`], storage: StorageType.File, duplicate_window: 300 * SECOND });
      await jetstream(nc).publish(eventSubject(prefix, "workflow", "w1"), JSON.stringify([]));
      const { logger, lines } = loggedLines();
      await JetStreamEventStore.open(nc, { prefix, logger, duplicateWindowMs: 60_000 });

      const info = await jsm.streams.info(eventStreamName(prefix));
      expect({ window: info.config.duplicate_window, messages: info.state.messages }).toEqual({ window: 60 * SECOND, messages: 1 });
      expect(lines.filter((l) => l.stream === eventStreamName(prefix)).map((l) => [l.msg, l.changes])).toEqual([
        ["stream updated to its declared config", { duplicate_window: { from: 300 * SECOND, to: 60 * SECOND } }],
      ]);
    });

    it("a run stream with another retention is refused by name, not recreated", async () => {
      await jsm.streams.add({ name: runStreamName(prefix), subjects: [`${prefix}.run.>`], retention: RetentionPolicy.Limits, storage: StorageType.File });
      await expect(JetStreamWorkQueue.open(nc, prefix, codec)).rejects.toThrow(`stream ${runStreamName(prefix)}: retention is limits, declared workqueue`);
      expect((await jsm.streams.info(runStreamName(prefix))).config.retention).toBe(RetentionPolicy.Limits);
    });
  });
});
