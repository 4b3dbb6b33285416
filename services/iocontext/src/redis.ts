// Connecting to Redis so that no call can hang: while Redis is down or stalled every
// command fails within a bounded time, and the client keeps reconnecting in the background.
import { Redis } from "ioredis";
import type { RedisAuth } from "@ephemera/kit";

export interface RedisTimeouts {
  /** A connection attempt that gets no answer (a host that drops packets) is abandoned after this. */
  connectTimeoutMs?: number;
  /** Every command fails after this, whether it waits for a reply or for the connection. */
  commandTimeoutMs?: number;
}

export const DEFAULT_REDIS_TIMEOUTS = { connectTimeoutMs: 2_000, commandTimeoutMs: 2_000 } as const;

/** `auth` (REDIS_USERNAME/REDIS_PASSWORD) overrides a user and password in the URL. */
export function openRedis(url: string, timeouts: RedisTimeouts = {}, auth?: RedisAuth): Redis {
  const { connectTimeoutMs, commandTimeoutMs } = { ...DEFAULT_REDIS_TIMEOUTS, ...timeouts };
  return new Redis(url, {
    ...(auth ? { password: auth.password, ...(auth.username ? { username: auth.username } : {}) } : {}),
    connectTimeout: connectTimeoutMs,
    // Bounds replies from a server that accepted the connection and stalled, and the wait
    // in the offline queue below: without it a command can wait forever.
    commandTimeout: commandTimeoutMs,
    // Commands issued while connecting at start wait for the connection, within
    // commandTimeout, so a call made then does not fail at once. Once connected, the IO
    // context sends nothing while Redis is down (RedisHealth), so nothing waits here.
    enableOfflineQueue: true,
    // A command pending when the connection drops is failed after one reconnection
    // attempt rather than twenty: callers fall back to the journal or retry themselves.
    maxRetriesPerRequest: 1,
    // Reconnect forever, at least once a second, so the cache is back soon after Redis is.
    retryStrategy: (attempt) => Math.min(attempt * 100, 1_000),
    lazyConnect: false,
  });
}

export type { Redis };
