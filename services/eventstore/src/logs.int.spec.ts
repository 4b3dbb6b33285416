// The log store contract against the machine's JetStream, each test under its own prefix
// (its stream deleted afterwards). Outages go through a TCP proxy of the test's own in front
// of the shared nats-server, which stays up.
import { connectNats } from "./jetstream.js";
import { JetStreamLogStore } from "./logs.js";
import { logStoreContract } from "./logs-contract.testkit.js";
import { NATS_URL, testNats } from "../../../test/support/servers.js";
import { tcpProxy } from "../../../test/support/tcp-proxy.js";

const TIMEOUT_MS = 1_000;

logStoreContract("JetStream", async () => {
  const { prefix, cleanup } = testNats("logs");
  const target = new URL(NATS_URL.replace(/^nats:/, "http:"));
  const proxy = await tcpProxy(Number(target.port || 4222), target.hostname);
  const nc = await connectNats(`nats://127.0.0.1:${proxy.port}`, "logs-contract");
  const store = await JetStreamLogStore.open(nc, prefix, { timeoutMs: TIMEOUT_MS });
  return {
    store,
    setAvailable: (available) => proxy.setAvailable(available),
    dispose: async () => {
      await nc.close();
      await proxy.close();
      const admin = await connectNats(NATS_URL, "logs-contract-cleanup");
      await cleanup(admin);
      await admin.close();
    },
  };
}, { failsWithinMs: 2 * TIMEOUT_MS + 500 });
