// The IO context service: step inputs and outputs on Redis, served over gRPC.
export { start, type IOContextConfig, type IOContextServiceDeps, type RunningIOContext } from "./start.js";
export { openRedis, DEFAULT_REDIS_TIMEOUTS, type Redis, type RedisTimeouts } from "./redis.js";
export type { OutputStore, OutputValue } from "./outputs.js";
export { RedisOutputStore } from "./outputs.redis.js";
export { RedisHealth, RedisDownError, DEFAULT_REDIS_HEARTBEAT, type RedisHealthOptions } from "./redis-health.js";
export { InMemoryOutputStore } from "./outputs.memory.js";
export { MAX_OUTPUT_BYTES } from "./service.js";
