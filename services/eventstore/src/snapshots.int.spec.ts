// The snapshot store contract against the machine's JetStream, each test under its own
// prefix (its streams deleted afterwards). Outages go through a TCP proxy of the test's own
// in front of the shared nats-server, which stays up; the event store connects directly.
import { connectNats } from "./connection.js";
import { JetStreamEventStore } from "./jetstream.js";
import { JetStreamSnapshotStore } from "./snapshots.js";
import { snapshotStoreContract } from "./snapshots-contract.testkit.js";
import { NATS_URL, testNats } from "../../../test/support/servers.js";
import { tcpProxy } from "../../../test/support/tcp-proxy.js";

const TIMEOUT_MS = 1_000;

snapshotStoreContract("JetStream object store", async () => {
  const { prefix, cleanup } = testNats("snaps");
  const target = new URL(NATS_URL.replace(/^nats:/, "http:"));
  const proxy = await tcpProxy(Number(target.port || 4222), target.hostname);
  const nc = await connectNats(`nats://127.0.0.1:${proxy.port}`, "snapshots-contract");
  const direct = await connectNats(NATS_URL, "snapshots-contract-events");
  const store = await JetStreamSnapshotStore.open(nc, prefix, { timeoutMs: TIMEOUT_MS });
  const events = await JetStreamEventStore.open(direct, { prefix });
  return {
    store,
    events,
    setAvailable: (available) => proxy.setAvailable(available),
    dispose: async () => {
      await events.close();
      await nc.close();
      await proxy.close();
      await cleanup(direct);
      await direct.close();
    },
  };
}, { failsWithinMs: 3 * TIMEOUT_MS + 500 });
