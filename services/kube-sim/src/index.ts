// A simulated Kubernetes API server whose kubelet runs pods' containers as Docker
// containers or local processes: for the Kubernetes driver's tests and for kubectl where
// there is no cluster.
export { RUNTIMES, startKubeSim, type KubeSim, type KubeSimOptions, type NetworkInfo, type RuntimeName } from "./start.js";
export { startKubeSimProcess, type KubeSimProcess, type KubeSimProcessOptions } from "./child.js";
export { defaultImageMap, parseImageMap, type ImageEntry, type ImageMount, type ImageStandIn } from "./kubelet/images.js";
export { FAIL, FAIL_AFTER_MS, FAIL_CONTAINER, type FaultKind } from "./kubelet/faults.js";
export type { FaultSpec } from "./sim/faults.js";
export type { StatsSnapshot } from "./sim/stats.js";
