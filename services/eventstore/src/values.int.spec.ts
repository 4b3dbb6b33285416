// The value store contract against the machine's JetStream, each test under its own prefix
// (its object store's stream deleted afterwards). Outages go through a TCP proxy of the
// test's own in front of the shared nats-server, which stays up.
import { createHash } from "node:crypto";
import { jetstream } from "@nats-io/jetstream";
import { setSha256Backend } from "@nats-io/obj";
import { connectNats } from "./connection.js";
import { getSha256Backend, Objm } from "./objects.js";
import { JetStreamValueStore, valuesBucket } from "./values.js";
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

describe("the output journal's hashing", () => {
  it("hashes with node:crypto, and reads and checks a value a JavaScript-hashing writer put (the same SHA-256)", async () => {
    const { prefix, cleanup } = testNats("valh");
    const nc = await connectNats(NATS_URL, "values-hashing");
    try {
      const store = await JetStreamValueStore.open(nc, prefix);
      expect(getSha256Backend()).toBe("native");
      const value = Buffer.alloc(300 * 1024, 7);
      const digest = createHash("sha256").update(value).digest("hex");
      // As a journal written before this process chose node:crypto: @nats-io/obj's own JavaScript hash.
      setSha256Backend("js");
      try {
        const os = await new Objm(jetstream(nc)).open(valuesBucket(prefix));
        await os.putBlob({ name: "rk.db.create.s1.1/old" }, value);
      } finally {
        setSha256Backend("native");
      }
      expect((await store.get("rk.db.create.s1.1/old", digest)).equals(value)).toBe(true);
      expect(await store.digest("rk.db.create.s1.1/old")).toBe(digest);
      expect(await store.put("rk.db.create.s1.1/new", value)).toBe(digest);
      expect(await store.digest("rk.db.create.s1.1/new")).toBe(digest);
    } finally {
      await cleanup(nc);
      await nc.close();
    }
  });
});
