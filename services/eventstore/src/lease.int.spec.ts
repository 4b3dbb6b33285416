import type { NatsConnection } from "@nats-io/nats-core";
import { connectNats } from "./connection.js";
import { JetStreamLeaseStore } from "./lease.js";
import { leaseContract } from "./lease-contract.testkit.js";
import { testNats } from "../../../test/support/servers.js";

leaseContract("JetStream KV", async () => {
  const { url, prefix, cleanup } = testNats("lease");
  const nc: NatsConnection = await connectNats(url, "lease-contract");
  const store = await JetStreamLeaseStore.open(nc, prefix);
  return { store, dispose: async () => { await cleanup(nc); await nc.close(); } };
});
