import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";
import { connectNats } from "./connection.js";
import { eventStreamName, eventSubject, JetStreamEventStore } from "./jetstream.js";
import { eventStoreContract } from "./contract.testkit.js";
import { NO_AGGREGATE, type AggregateEvents } from "./types.js";
import { testNats } from "../../../test/support/servers.js";

eventStoreContract("JetStream", async () => {
  const { url, prefix, cleanup } = testNats();
  const short = testNats();
  const nc = await connectNats(url, "contract");
  const nc2 = await connectNats(url, "contract-2");
  const store = await JetStreamEventStore.open(nc, { prefix });
  return {
    store,
    reopen: () => JetStreamEventStore.open(nc2, { prefix }),
    shortWindow: () => JetStreamEventStore.open(nc, { prefix: short.prefix, duplicateWindowMs: 1000 }),
    dispose: async () => { await cleanup(nc); await short.cleanup(nc); await nc.close(); await nc2.close(); },
  };
});

const NO_READ: AggregateEvents = { events: [], revision: 0, version: 0 };

describe("JetStreamEventStore reads", () => {
  const meta = { source: "test" };
  let nc: NatsConnection;
  let prefix: string;
  let cleanup: (nc: NatsConnection) => Promise<void>;
  /** The JetStream API requests this connection made (the server copies them to any subscriber). */
  let requests: string[];

  beforeEach(async () => {
    ({ prefix, cleanup } = testNats());
    nc = await connectNats(testNats().url, "reads");
    requests = [];
    // The server copies every client's requests: only those about this test's streams are its own
    // (another suite's STREAM.LIST, made meanwhile on the shared server, is not).
    nc.subscribe("$JS.API.>", { callback: (_err, m) => { if (m.subject.includes(prefix)) requests.push(m.subject); } });
    await nc.flush();
  });
  afterEach(async () => { await cleanup(nc); await nc.close(); });

  /** The API requests `fn` made; a flush makes sure every copy has arrived. */
  async function requestsOf(fn: () => Promise<unknown>): Promise<string[]> {
    const from = requests.length;
    await fn();
    await nc.flush();
    return requests.slice(from);
  }

  it("gets messages, never creates a consumer: one request when the handle holds all but the last commit, one more per other missing commit", async () => {
    const writer = await JetStreamEventStore.open(nc, { prefix });
    const get = `$JS.API.STREAM.MSG.GET.${eventStreamName(prefix)}`;
    let rev = NO_AGGREGATE;
    for (let i = 1; i <= 3; i++) {
      rev = await writer.append("steprun", "r1", rev, [{ type: "t", data: { i } }], meta);
      await writer.append("workflow", "w1", i === 1 ? NO_AGGREGATE : (await writer.read("workflow", "w1")), [{ type: "t", data: { i } }], meta);
    }
    // The writer holds what it appended: only the last sequence is asked for.
    expect(await requestsOf(() => writer.read("steprun", "r1"))).toEqual([get]);

    // Another handle holds nothing: the last commit, then the two before it one by one.
    const reader = await JetStreamEventStore.open(nc, { prefix });
    let read = NO_READ;
    expect(await requestsOf(async () => { read = await reader.read("steprun", "r1"); })).toEqual([get, get, get]);
    expect(read.events.map((e) => e.data)).toEqual([{ i: 1 }, { i: 2 }, { i: 3 }]);
    expect(await requestsOf(async () => { read = await reader.read("steprun", "r1"); })).toEqual([get]);
    expect(read.revision).toBe(rev.revision);

    // One commit by the writer: the last commit is the one missing, so still one request;
    // two commits: one more.
    await writer.append("workflow", "w1", await writer.read("workflow", "w1"), [{ type: "t", data: { i: 4 } }], meta);
    rev = await writer.append("steprun", "r1", rev, [{ type: "t", data: { i: 4 } }], meta);
    expect(await requestsOf(async () => { read = await reader.read("steprun", "r1"); })).toEqual([get]);
    expect(read).toMatchObject({ revision: rev.revision, version: 4 });
    rev = await writer.append("steprun", "r1", rev, [{ type: "t", data: { i: 5 } }], meta);
    await writer.append("workflow", "w1", await writer.read("workflow", "w1"), [{ type: "t", data: { i: 5 } }], meta);
    rev = await writer.append("steprun", "r1", rev, [{ type: "t", data: { i: 6 } }, { type: "t", data: { i: 7 } }], meta);
    expect(await requestsOf(async () => { read = await reader.read("steprun", "r1"); })).toEqual([get, get]);
    expect(read).toMatchObject({ revision: rev.revision, version: 7 });
    expect(read.events.map((e) => e.data)).toEqual([1, 2, 3, 4, 5, 6, 7].map((i) => ({ i })));

    expect(requests.filter((s) => s.includes(".CONSUMER."))).toEqual([]);
    expect((await (await jetstreamManager(nc)).streams.info(eventStreamName(prefix))).state.consumer_count).toBe(0);
  });

  it("reads an aggregate purged (and written again) from the server, not from what it held", async () => {
    const jsm = await jetstreamManager(nc);
    const purge = (id: string) => jsm.streams.purge(eventStreamName(prefix), { filter: eventSubject(prefix, "counter", id) });
    const holding = async (id: string) => {
      const store = await JetStreamEventStore.open(nc, { prefix });
      const first = await store.append("counter", id, NO_AGGREGATE, [{ type: "t", data: { old: 1 } }], meta);
      await store.append("counter", id, first, [{ type: "t", data: { old: 2 } }], meta);
      expect((await store.read("counter", id)).version).toBe(2);
      return store;
    };
    const emptied = await holding("emptied");
    await purge("emptied");
    expect(await emptied.read("counter", "emptied")).toEqual({ events: [], revision: 0, version: 0 });

    const rewritten = await holding("rewritten");
    await purge("rewritten");
    const writer = await JetStreamEventStore.open(nc, { prefix });
    const first = await writer.append("counter", "rewritten", NO_AGGREGATE, [{ type: "t", data: { new: 1 } }], meta);
    await writer.append("counter", "rewritten", first, [{ type: "t", data: { new: 2 } }], meta);
    const read = await rewritten.read("counter", "rewritten");
    expect(read.events.map((e) => e.data)).toEqual([{ new: 1 }, { new: 2 }]);
    expect(read.version).toBe(2);
  });

  it("reads right with a cache of one aggregate, or none", async () => {
    for (const aggregates of [1, 0]) {
      const store = await JetStreamEventStore.open(nc, { prefix, cache: { aggregates } });
      const other = await JetStreamEventStore.open(nc, { prefix });
      const revs = new Map<string, Awaited<ReturnType<typeof store.append>>>();
      for (let i = 1; i <= 4; i++) {
        for (const id of [`a${aggregates}`, `b${aggregates}`]) {
          const by = i % 2 ? store : other;
          revs.set(id, await by.append("counter", id, revs.get(id) ?? NO_AGGREGATE, [{ type: "t", data: { i } }], meta));
          expect((await store.read("counter", id)).events.map((e) => (e.data as { i: number }).i)).toEqual(Array.from({ length: i }, (_, k) => k + 1));
        }
      }
    }
  });
});

describe("connectNats", () => {
  it("takes a comma-separated list of servers and connects through one that answers when the first does not", async () => {
    const { url } = testNats();
    // Port 1 takes no connections here: the client must move on to the next server of the list.
    const nc = await connectNats(`nats://127.0.0.1:1, ${url}`, "server-list");
    try {
      expect(nc.getServer()).toBe(new URL(url).host);
    } finally {
      await nc.close();
    }
  });
});
