import type { NatsConnection } from "@nats-io/nats-core";
import { connectNats } from "./connection.js";
import { jetstreamManager } from "@nats-io/jetstream";
import { waitFor } from "@ephemera/kit";
import { runStreamName } from "./workqueue.js";
import { JetStreamWorkQueue } from "./workqueue-jetstream.js";
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
    delivered: async (cluster, lane) => {
      const jsm = await jetstreamManager(admin);
      const info = () => jsm.consumers.info(runStreamName(prefix), `runner_${cluster}_${lane}`).catch(() => undefined);
      await waitFor(async () => (await info())?.num_pending === 0, { what: `the ${lane} lane's items handed to the consumers` });
    },
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
