// The parts of a pod (or a pod template) the injection reads and writes, and the names it
// shares with the router, kubectl and Signadot's manifests.

export interface ContainerPort {
  name?: string;
  containerPort?: number;
  protocol?: string;
}

export interface Container {
  name?: string;
  ports?: ContainerPort[];
  [field: string]: unknown;
}

export interface OwnerReference {
  kind?: string;
  name?: string;
  controller?: boolean;
}

export interface PodMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
}

/** A pod as an AdmissionReview carries it, or a workload's pod template. */
export interface Pod {
  metadata?: PodMeta;
  spec?: { containers?: Container[]; initContainers?: Container[]; [field: string]: unknown };
}

export const INJECT_ANNOTATION = "sidecar.ephemera.dev/inject";
/** Signadot's, so manifests written for it are injected unchanged. */
export const SIGNADOT_INJECT_ANNOTATION = "sidecar.signadot.com/inject";
export const STATUS_ANNOTATION = "sidecar.ephemera.dev/status";
export const WORKLOAD_ANNOTATION = "sidecar.ephemera.dev/workload";
/** Where `kubectl logs` and `kubectl exec` go without `-c`: the app, not the router. */
export const DEFAULT_CONTAINER_ANNOTATION = "kubectl.kubernetes.io/default-container";

export const ROUTER_CONTAINER = "ephemera-router";
export const ROUTER_INIT_CONTAINER = "ephemera-router-init";
/** The router's plain-HTTP `/healthz`, ready once it has the first rules snapshot. */
export const ROUTER_HEALTH_PORT = 15020;
/** The router's listener for the first captured app port; the next ones follow. */
export const FIRST_LISTEN_PORT = 15000;

/**
 * `pod "shop/orders-7d9c-x2b4f"`, or `pod "shop/orders-7d9c-*"` when only the generateName is
 * known yet (a ReplicaSet's pods). ASCII only: the warning travels in an HTTP header.
 */
export function podLabel(pod: Pod, namespace: string): string {
  const meta = pod.metadata ?? {};
  const name = meta.name || (meta.generateName ? `${meta.generateName}*` : "(unnamed)");
  return `pod "${namespace}/${name}"`;
}
