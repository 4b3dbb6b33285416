// The log store contract against the machine's JetStream, each test under its own prefix
// (its stream deleted afterwards). Outages go through a TCP proxy of the test's own in front
// of the shared nats-server, which stays up.
import { connectNats } from "./connection.js";
import { DEFAULT_LOG_RETENTION_MS, JetStreamLogStore } from "./logs.js";
import { logStoreContract } from "./logs-contract.testkit.js";
import { NATS_URL, testNats } from "../../../test/support/servers.js";
import { tcpProxy } from "../../../test/support/tcp-proxy.js";

const TIMEOUT_MS = 1_000;

logStoreContract("JetStream", async ({ retentionMs } = {}) => {
  const { prefix, cleanup } = testNats("logs");
  const target = new URL(NATS_URL.replace(/^nats:/, "http:"));
  const proxy = await tcpProxy(Number(target.port || 4222), target.hostname);
  const nc = await connectNats(`nats://127.0.0.1:${proxy.port}`, "logs-contract");
  const store = await JetStreamLogStore.open(nc, prefix, { timeoutMs: TIMEOUT_MS, ...(retentionMs ? { retentionMs } : {}) });
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

describe("JetStream log store: retention", () => {
  it("is the stream's max age: 7 days by default, set by whoever opens it with one, kept by whoever opens it without", async () => {
    const { prefix, cleanup } = testNats("logret");
    const nc = await connectNats(NATS_URL, "logs-retention");
    try {
      const first = await JetStreamLogStore.open(nc, prefix);
      expect(await first.retentionMs()).toBe(DEFAULT_LOG_RETENTION_MS);
      const owner = await JetStreamLogStore.open(nc, prefix, { retentionMs: 36 * 3_600_000 });
      expect(await owner.retentionMs()).toBe(36 * 3_600_000);
      const reader = await JetStreamLogStore.open(nc, prefix);
      expect(await reader.retentionMs()).toBe(36 * 3_600_000);
      await expect(JetStreamLogStore.open(nc, prefix, { retentionMs: 10 })).rejects.toThrow("at least 1 s");
    } finally {
      await cleanup(nc);
      await nc.close();
    }
  });
});
