import { connectNats, JetStreamEventStore } from "./jetstream.js";
import { eventStoreContract } from "./contract.testkit.js";
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
