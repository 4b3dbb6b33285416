// Prometheus metrics for ephemera's services (`@ephemera/kit/metrics`): apart from kit's main
// entry, so that the clients and the pod agent, which serve no metrics, never load prom-client.
export * from "./metrics/registry.js";
export * from "./metrics/server.js";
export * from "./metrics/grpc.js";
