// The value store contract against the machine's JetStream, each test under its own prefix
// (its object store's stream deleted afterwards). Outages go through a TCP proxy of the
// test's own in front of the shared nats-server, which stays up.
import { connectNats } from "./connection.js";
import { JetStreamValueStore } from "./values.js";
import { valueStoreContract } from "./values-contract.testkit.js";
import { NATS_URL, testNats } from "../../../test/support/servers.js";
import { tcpProxy } from "../../../test/support/tcp-proxy.js";

const TIMEOUT_MS = 1_000;

valueStoreContract("JetStream object store", async () => {
  const { prefix, cleanup } = testNats("vals");
  const target = new URL(NATS_URL.replace(/^nats:/, "http:"));
  const proxy = await tcpProxy(Number(target.port || 4222), target.hostname);
  const nc = await connectNats(`nats://127.0.0.1:${proxy.port}`, "values-contract");
  const store = await JetStreamValueStore.open(nc, prefix, { timeoutMs: TIMEOUT_MS });
  return {
    store,
    setAvailable: (available) => proxy.setAvailable(available),
    dispose: async () => {
      await nc.close();
      await proxy.close();
      const admin = await connectNats(NATS_URL, "values-contract-cleanup");
      await cleanup(admin);
      await admin.close();
    },
  };
}, { failsWithinMs: 3 * TIMEOUT_MS + 500 });
