// Removes everything ephemera keeps under one EPHEMERA_PREFIX on NATS and Redis: its streams
// (events, logs, values, object stores) and its Redis keys. The demos call it when they end.
//   node scripts/remove-prefix.mjs PREFIX       (NATS_URL, REDIS_URL as the services read them)
import { connectNats } from "@ephemera/eventstore";
import { jetstreamManager } from "@nats-io/jetstream";
import { Redis } from "ioredis";

const prefix = process.argv[2];
if (!prefix) {
  console.error("usage: node scripts/remove-prefix.mjs PREFIX");
  process.exit(2);
}
const nc = await connectNats(process.env.NATS_URL ?? "nats://127.0.0.1:4222", "remove-prefix");
let streams = 0;
try {
  const jsm = await jetstreamManager(nc);
  for await (const s of jsm.streams.list()) {
    if (s.config.name.startsWith(`${prefix}_`) || s.config.name.startsWith(`OBJ_${prefix}_`)) {
      await jsm.streams.delete(s.config.name);
      streams++;
    }
  }
} finally {
  await nc.close();
}
const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
let keys = 0;
try {
  for await (const batch of redis.scanStream({ match: `${prefix}:*`, count: 500 })) {
    if (batch.length) keys += await redis.del(...batch);
  }
} finally {
  redis.disconnect();
}
console.error(`prefix ${prefix} removed: ${streams} stream(s), ${keys} Redis key(s)`);
