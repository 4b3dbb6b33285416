// EPHEMERA_STREAM_REPLICAS reaches every stream and bucket ephemera creates. The machine's
// nats-server is a single server: a stream of one replica is made as asked, and one of
// three is refused by the server, which it would not be if the setting were dropped.
import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";
import { dispatchCodec } from "@ephemera/events";
import { connectNats } from "./connection.js";
import { eventStreamName, JetStreamEventStore } from "./jetstream.js";
import { JetStreamLeaseStore, leaseBucket } from "./lease.js";
import { JetStreamLogStore, logStreamName } from "./logs.js";
import { JetStreamValueStore, valuesBucket } from "./values.js";
import { cancelStreamName, runStreamName } from "./workqueue.js";
import { JetStreamWorkQueue } from "./workqueue-jetstream.js";
import { NATS_URL, testNats } from "../../../test/support/servers.js";

const opens = {
  events: (nc: NatsConnection, prefix: string, replicas: number) => JetStreamEventStore.open(nc, { prefix, replicas }),
  logs: (nc: NatsConnection, prefix: string, replicas: number) => JetStreamLogStore.open(nc, prefix, { replicas }),
  values: (nc: NatsConnection, prefix: string, replicas: number) => JetStreamValueStore.open(nc, prefix, { replicas }),
  "work queue": (nc: NatsConnection, prefix: string, replicas: number) => JetStreamWorkQueue.open(nc, prefix, dispatchCodec, { replicas }),
  leases: (nc: NatsConnection, prefix: string, replicas: number) => JetStreamLeaseStore.open(nc, prefix, { replicas }),
};
const streams = (prefix: string): Record<keyof typeof opens, string[]> => ({
  events: [eventStreamName(prefix)], logs: [logStreamName(prefix)], values: [`OBJ_${valuesBucket(prefix)}`], "work queue": [runStreamName(prefix), cancelStreamName(prefix)],
  leases: [`KV_${leaseBucket(prefix)}`],
});

describe("stream replicas", () => {
  let nc: NatsConnection;
  const cleanups: Array<() => Promise<void>> = [];
  beforeAll(async () => { nc = await connectNats(NATS_URL, "replicas"); });
  afterAll(async () => {
    for (const c of cleanups) await c();
    await nc.close();
  });

  it("work queue: the cancel stream gets the replicas too (the run stream made first, so only the cancel stream is left to refuse)", async () => {
    const { prefix, cleanup } = testNats("repl");
    cleanups.push(() => cleanup(nc));
    await JetStreamWorkQueue.open(nc, prefix, dispatchCodec, { replicas: 1 });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(cancelStreamName(prefix));
    await expect(JetStreamWorkQueue.open(nc, prefix, dispatchCodec, { replicas: 3 })).rejects.toThrow("replicas > 1 not supported in non-clustered mode");
  });

  it.each(Object.keys(opens) as Array<keyof typeof opens>)("%s: creates its streams with the replicas asked for", async (store) => {
    const { prefix, cleanup } = testNats("repl");
    cleanups.push(() => cleanup(nc));
    await expect(opens[store](nc, prefix, 3)).rejects.toThrow("replicas > 1 not supported in non-clustered mode");
    await opens[store](nc, prefix, 1);
    const jsm = await jetstreamManager(nc);
    for (const name of streams(prefix)[store]) expect((await jsm.streams.info(name)).config.num_replicas).toBe(1);
  });
});
