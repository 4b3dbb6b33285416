// The tunnel service (its server, for main.ts and tests) and the wire protocol it speaks.
// Workstations use the client library: `@ephemera/tunnel/client`.
export { startTunnel, type RunningTunnel, type TunnelDeps, type TunnelSettings } from "./start.js";
export { tunnelConfig, DEFAULT_TUNNEL_LISTEN, type TunnelConfig } from "./config.js";
export { apiAuthorizer, httpStatusOf, Refusal, isRefusal, type Authorize, type Authorization } from "./server/authorize.js";
export { kubeServices, noServices, type ListServices } from "./server/services.js";
export { kubeEnvironment, EnvironmentError, isEnvironmentError, type ReadEnvironment, type EnvironmentTarget } from "./server/kube-environment.js";
export { TunnelMetrics } from "./server/metrics.js";
export { DEFAULT_LIVENESS, type Liveness } from "./liveness.js";
export * from "./protocol.js";
