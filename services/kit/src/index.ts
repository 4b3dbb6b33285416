export * from "./errors.js";
export * from "./config.js";
export * from "./logger.js";
export * from "./wait.js";
export * from "./ids.js";
export * from "./grpc.js";
export * from "./shutdown.js";
export * from "./timers.js";
