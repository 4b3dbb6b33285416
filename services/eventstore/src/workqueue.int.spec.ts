import type { NatsConnection } from "@nats-io/nats-core";
import { connectNats } from "./jetstream.js";
import { JetStreamWorkQueue } from "./workqueue.js";
import { workQueueContract } from "./workqueue-contract.testkit.js";
import { testNats } from "../../../test/support/servers.js";

const codec = { encode: (d: { n: number }) => JSON.stringify(d), decode: (s: string) => JSON.parse(s) as { n: number } };

workQueueContract("JetStream", async () => {
  const { url, prefix, cleanup } = testNats();
  const connections: NatsConnection[] = [];
  const connection = async () => { const nc = await connectNats(url, "wq-contract"); connections.push(nc); return nc; };
  const admin = await connection();
  return {
    open: async () => JetStreamWorkQueue.open(await connection(), prefix, codec, { ackWaitMs: 1000 }),
    down: async () => {
      const other = testNats();
      const nc = await connectNats(url, "wq-down");
      const q = await JetStreamWorkQueue.open(nc, other.prefix, codec);
      await other.cleanup(nc);
      await nc.close();
      return q;
    },
    dispose: async () => {
      await cleanup(admin);
      await Promise.all(connections.map((nc) => nc.close()));
    },
  };
});
