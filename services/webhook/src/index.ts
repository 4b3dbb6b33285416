// The router injector: the pod mutation (pure), the admission webhook serving it, its
// registration with a cluster, and the same patch for manifests applied with kubectl.
export { injectRouter, type AddOperation, type InjectOptions } from "./inject/inject.js";
export { asksForRouter, decide, isInjected, portMappings, type Decision, type PortMapping } from "./inject/decide.js";
export { workloadOf } from "./inject/workload.js";
export * from "./inject/pod.js";
