// ephemera-router, the routing sidecar: what other packages and tests may use.
export { routingKeyOf, ROUTING_KEY_HEADERS, ROUTING_KEY_MEMBER, type Headers, type HeaderValue } from "./headers.js";
export {
  routerConfig, parsePorts, parseWorkload, isRouterConfigError, RouterConfigError, DEFAULT_ROUTES, DEFAULT_HEALTH_LISTEN,
  DEFAULT_SNIFF_TIMEOUT_MS, WORKLOAD_KINDS, type RouterConfig, type PortMapping, type Workload,
} from "./config.js";
export { RoutingTable, localApp, type Destination } from "./rules/table.js";
export { watchRoutingRules, backoffDelay, DEFAULT_BACKOFF, type Backoff, type RulesWatch } from "./rules/watch.js";
export { sniff, type Protocol } from "./proxy/sniff.js";
export { startRouter, type RouterOptions, type RunningRouter } from "./router.js";
