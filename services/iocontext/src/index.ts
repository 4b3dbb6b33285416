// The IO context service: step inputs and outputs on Redis, served over gRPC.
export { start, type IOContextConfig, type IOContextServiceDeps, type RunningIOContext } from "./start.js";
export { openRedis, type Redis } from "./redis.js";
export { MAX_OUTPUT_BYTES } from "./service.js";
