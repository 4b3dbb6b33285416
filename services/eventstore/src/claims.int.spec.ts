// The claim store contract against the machine's JetStream, each test under its own prefix
// (its KV bucket's stream deleted afterwards). Outages go through a TCP proxy of the test's
// own in front of the shared nats-server, which stays up.
import { connectNats } from "./connection.js";
import { JetStreamClaimStore } from "./claims.js";
import { claimStoreContract } from "./claims-contract.testkit.js";
import { NATS_URL, testNats } from "../../../test/support/servers.js";
import { tcpProxy } from "../../../test/support/tcp-proxy.js";

const TIMEOUT_MS = 1_000;

claimStoreContract("JetStream KV", async () => {
  const { prefix, cleanup } = testNats("claims");
  const target = new URL(NATS_URL.replace(/^nats:/, "http:"));
  const proxy = await tcpProxy(Number(target.port || 4222), target.hostname);
  const nc = await connectNats(`nats://127.0.0.1:${proxy.port}`, "claims-contract");
  const clock = { now: Date.now() };
  const store = await JetStreamClaimStore.open(nc, prefix, { timeoutMs: TIMEOUT_MS, now: () => clock.now });
  return {
    store,
    clock,
    setAvailable: (available) => proxy.setAvailable(available),
    dispose: async () => {
      await nc.close();
      await proxy.close();
      const admin = await connectNats(NATS_URL, "claims-contract-cleanup");
      await cleanup(admin);
      await admin.close();
    },
  };
}, { failsWithinMs: 3 * TIMEOUT_MS + 500 });

describe("JetStream claims: what a claim costs", () => {
  it("takes a run never claimed (or released) with one request, and reads a held claim before taking it over", async () => {
    const { prefix, cleanup } = testNats("claimcost");
    const nc = await connectNats(NATS_URL, "claims-cost");
    const clock = { now: Date.now() };
    try {
      const store = await JetStreamClaimStore.open(nc, prefix, { now: () => clock.now });
      const sent = async (f: () => Promise<unknown>) => {
        const before = nc.stats().outMsgs;
        await f();
        return nc.stats().outMsgs - before;
      };
      let acquired: Awaited<ReturnType<typeof store.acquire>> | undefined;
      expect(await sent(async () => { acquired = await store.acquire("rk.r.create.a.1", "runner-a", 10_000); })).toBe(1);
      expect(acquired?.taken).toBe(true);
      // Held by a live runner: read, and left alone.
      const refused = await store.acquire("rk.r.create.a.1", "runner-b", 10_000);
      expect(refused).toMatchObject({ taken: false, claim: { holder: "runner-a" } });
      // Expired: taken over, with what its holder kept.
      await store.renew(acquired!.claim, 10_000, "kept-result");
      clock.now += 20_000;
      expect(await store.acquire("rk.r.create.a.1", "runner-b", 10_000)).toMatchObject({ taken: true, claim: { holder: "runner-b", result: "kept-result" } });
      const held = await store.read("rk.r.create.a.1");
      await store.release(held!);
      expect(await sent(() => store.acquire("rk.r.create.a.1", "runner-c", 10_000))).toBeLessThanOrEqual(3);
      expect(await store.read("rk.r.create.a.1")).toMatchObject({ holder: "runner-c" });
    } finally {
      await cleanup(nc);
      await nc.close();
    }
  });
});
