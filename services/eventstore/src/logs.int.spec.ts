// The log store contract against the machine's JetStream, each test under its own prefix
// (its stream deleted afterwards). Outages go through a TCP proxy of the test's own in front
// of the shared nats-server, which stays up.
import { connect, createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { connectNats } from "./jetstream.js";
import { JetStreamLogStore } from "./logs.js";
import { logStoreContract } from "./logs-contract.testkit.js";
import { NATS_URL, testNats } from "../../../test/support/servers.js";

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

/** Down closes every connection and refuses new ones, as a nats-server that died would; up listens again. */
async function tcpProxy(targetPort: number, targetHost: string) {
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  const track = (s: Socket) => { sockets.add(s); s.on("close", () => sockets.delete(s)); };
  const listen = () => new Promise<void>((resolve, reject) => {
    const s = createServer((client) => {
      const upstream = connect(targetPort, targetHost);
      track(client);
      track(upstream);
      const end = () => { client.destroy(); upstream.destroy(); };
      client.on("error", end);
      upstream.on("error", end);
      client.pipe(upstream).pipe(client);
    });
    s.once("error", reject);
    s.listen(port, "127.0.0.1", () => { port = (s.address() as AddressInfo).port; server = s; resolve(); });
  });
  const shut = async () => {
    const s = server;
    server = undefined;
    for (const socket of sockets) socket.destroy();
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  };
  await listen();
  return {
    port,
    setAvailable: async (available: boolean) => { if (available && !server) await listen(); if (!available) await shut(); },
    close: shut,
  };
}
