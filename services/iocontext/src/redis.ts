// Connecting to Redis with bounded retries per command, so a call fails instead of hanging.
import { Redis } from "ioredis";

export function openRedis(url: string): Redis {
  return new Redis(url, { maxRetriesPerRequest: 3, enableOfflineQueue: true, lazyConnect: false });
}

export type { Redis };
