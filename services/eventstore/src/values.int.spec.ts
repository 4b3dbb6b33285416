// The value store contract against the machine's JetStream, each test under its own prefix
// (its object store's stream deleted afterwards). Outages go through a TCP proxy of the
// test's own in front of the shared nats-server, which stays up.
import { createHash } from "node:crypto";
import { jetstream } from "@nats-io/jetstream";
import { setSha256Backend } from "@nats-io/obj";
import { connectNats } from "./connection.js";
import { waitFor } from "@ephemera/kit";
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

describe("a put to the output journal", () => {
  it("stores its chunk while it looks up the value it replaces, and still removes the old one's chunks", async () => {
    const { prefix, cleanup } = testNats("valp");
    const nc = await connectNats(NATS_URL, "values-put");
    const snoop = await connectNats(NATS_URL, "values-put-snoop");
    try {
      const store = await JetStreamValueStore.open(nc, prefix);
      const bucket = valuesBucket(prefix);
      await store.put("rk.db.create.s1.1/v", Buffer.from("first"));
      // The journal's bucket as the store writes it, its lookup held until the test lets it answer.
      const os = await new Objm(jetstream(nc)).open(bucket);
      const lookup = os.info.bind(os);
      let answer!: () => void;
      const held = new Promise<void>((resolve) => { answer = resolve; });
      os.info = async (name: string) => { await held; return lookup(name); };
      const chunks: string[] = [];
      const sub = snoop.subscribe(`$O.${bucket}.C.>`, { callback: (_err, m) => { chunks.push(m.subject); } });
      await snoop.flush();
      const putting = os.putBlob({ name: "rk.db.create.s1.1/v" }, Buffer.from("second"));
      // The chunk reaches the server while the lookup has no answer yet (one round trip before the meta, not two).
      await waitFor(() => chunks.length === 1, { what: "the new chunk stored while the lookup is held" });
      answer();
      await putting;
      sub.unsubscribe();
      expect((await store.read("rk.db.create.s1.1/v"))?.toString()).toBe("second");
      // The first value's chunk was purged: one chunk and one meta are left.
      const info = await (await jetstream(nc).jetstreamManager()).streams.info(`OBJ_${bucket}`);
      expect(info.state.messages).toBe(2);
    } finally {
      await snoop.close();
      await cleanup(nc);
      await nc.close();
    }
  });
});
