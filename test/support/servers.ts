// Helpers for integration tests: the shared NATS and Redis of this machine, a fresh
// EPHEMERA_PREFIX per test, and removal of what the test created.
import { randomBytes } from "node:crypto";
import type { NatsConnection } from "@nats-io/nats-core";
import { jetstreamManager } from "@nats-io/jetstream";
import { connectNats } from "@ephemera/eventstore";
import { Redis } from "ioredis";

export const NATS_URL = process.env["NATS_URL"] ?? "nats://127.0.0.1:4222";
export const REDIS_URL = process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379";

export function uniquePrefix(tag = "t"): string {
  return `${tag}${randomBytes(5).toString("hex")}`;
}

/** Deletes every stream whose name starts with the prefix (object stores' `OBJ_<prefix>_…` and KV buckets' `KV_<prefix>_…` included). */
export async function deleteStreams(nc: NatsConnection, prefix: string): Promise<void> {
  const jsm = await jetstreamManager(nc);
  for await (const s of jsm.streams.list()) {
    if ([`${prefix}_`, `OBJ_${prefix}_`, `KV_${prefix}_`].some((p) => s.config.name.startsWith(p))) await jsm.streams.delete(s.config.name);
  }
}

export function testNats(tag = "t") {
  const prefix = uniquePrefix(tag);
  return { url: NATS_URL, prefix, cleanup: (nc: NatsConnection) => deleteStreams(nc, prefix) };
}

/** Removes everything a stack under `prefix` left on the shared servers: its streams and its Redis keys. */
export async function removePrefix(prefix: string): Promise<void> {
  const nc = await connectNats(NATS_URL, "cleanup");
  try {
    await deleteStreams(nc, prefix);
  } finally {
    await nc.close();
  }
  const redis = new Redis(REDIS_URL);
  try {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length) await redis.del(...keys);
  } finally {
    redis.disconnect();
  }
}
