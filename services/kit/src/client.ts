// `@ephemera/kit/client`: what a client of ephemera's API needs (named errors, TLS from the
// environment, deadline-bound calls) without the server side, its logger and its token
// signing, so a command line loads in a fraction of the time.
export * from "./errors.js";
export * from "./config.js";
export * from "./wait.js";
export { Backoff, type BackoffBounds } from "./backoff.js";
export { longTimeout, MAX_TIMER_MS, type LongTimeout } from "./timers.js";
export * from "./listen.js";
export * from "./tls.js";
export * from "./grpc-status.js";
export * from "./grpc-client.js";
