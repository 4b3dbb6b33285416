// The output store contract against the machine's Redis, each test under its own key
// prefix; outages go through a proxy of the test's own, so the shared Redis stays up.
import { once } from "node:events";
import { REDIS_URL, uniquePrefix } from "../../../test/support/servers.js";
import { RedisOutputStore } from "./outputs.redis.js";
import { outputStoreContract } from "./outputs-contract.testkit.js";
import { openRedis } from "./redis.js";
import { RedisHealth } from "./redis-health.js";
import { tcpProxy } from "../../../test/support/tcp-proxy.js";

const TIMEOUT_MS = 500;

outputStoreContract("Redis", async () => {
  const prefix = uniquePrefix("out");
  const shared = new URL(REDIS_URL);
  const proxy = await tcpProxy(Number(shared.port || 6379), shared.hostname);
  const redis = openRedis(`redis://127.0.0.1:${proxy.port}`, { commandTimeoutMs: TIMEOUT_MS, connectTimeoutMs: TIMEOUT_MS });
  redis.on("error", () => undefined); // connection errors are expected here; the calls report them
  // Connected before a test's first command: the command timeout bounds the contract's calls,
  // not the connection's set-up through the proxy (which a loaded CI worker took past 500 ms).
  if (redis.status !== "ready") await once(redis, "ready");
  // As the IO context runs it: calls while Redis is known to be down are refused at once.
  const health = new RedisHealth(redis);
  return {
    store: new RedisOutputStore(redis, prefix, health),
    setAvailable: (available) => proxy.setAvailable(available),
    dispose: async () => {
      health.stop();
      // Quit over a live connection: a client disconnected while reconnecting keeps a timer.
      await proxy.setAvailable(true);
      await redis.quit().catch(() => redis.disconnect());
      await proxy.close();
      const cleaner = openRedis(REDIS_URL);
      const keys = await cleaner.keys(`${prefix}:*`);
      if (keys.length) await cleaner.del(...keys);
      await cleaner.quit();
    },
  };
}, { failsWithinMs: 2 * TIMEOUT_MS + 500 });
