// The mutation itself: the RFC 6902 JSON patch that gives a pod the router's init container
// (the iptables capture) and sidecar. Pure; the webhook answers it, the kubectl patch applies it.
import { decide, type PortMapping } from "./decide.js";
import {
  DEFAULT_CONTAINER_ANNOTATION, ROUTER_CONTAINER, ROUTER_HEALTH_PORT, ROUTER_INIT_CONTAINER, STATUS_ANNOTATION, type Container, type Pod,
} from "./pod.js";

export interface InjectOptions {
  /** The router's image, e.g. `ephemera/router:0.1.0`. */
  image: string;
  /** host:port of the Routes API's gRPC, as the router dials it. */
  routes: string;
  /** The pod's namespace when its object does not say (an AdmissionReview's `request.namespace`). */
  namespace?: string;
  /** A Secret in the pod's namespace holding a viewer token, for a Routes API that asks for tokens. */
  tokenSecret?: { name: string; key: string };
}

/** Every operation is an `add`: the mutation only adds. */
export interface AddOperation {
  op: "add";
  path: string;
  value: unknown;
}

const pointer = (key: string) => key.replace(/~/g, "~0").replace(/\//g, "~1");
const portsEnv = (ports: PortMapping[]) => ports.map((p) => `${p.app}:${p.listen}`).join(",");

function initContainer(options: InjectOptions, ports: PortMapping[]): Container {
  return {
    name: ROUTER_INIT_CONTAINER,
    image: options.image,
    command: ["ephemera-router-init"],
    env: [{ name: "EPHEMERA_ROUTER_PORTS", value: portsEnv(ports) }],
    // iptables in the pod's network namespace: root with NET_ADMIN and NET_RAW, nothing else.
    securityContext: {
      runAsUser: 0, runAsNonRoot: false, allowPrivilegeEscalation: false,
      capabilities: { add: ["NET_ADMIN", "NET_RAW"], drop: ["ALL"] },
    },
    resources: { requests: { cpu: "10m", memory: "16Mi" }, limits: { cpu: "100m", memory: "64Mi" } },
  };
}

function sidecar(options: InjectOptions, workload: string, ports: PortMapping[]): Container {
  return {
    name: ROUTER_CONTAINER,
    image: options.image,
    command: ["node", "/router/router.cjs"],
    env: [
      { name: "EPHEMERA_ROUTER_WORKLOAD", value: workload },
      { name: "EPHEMERA_ROUTER_PORTS", value: portsEnv(ports) },
      { name: "EPHEMERA_ROUTES", value: options.routes },
      ...(options.tokenSecret
        ? [{ name: "EPHEMERA_TOKEN", valueFrom: { secretKeyRef: { name: options.tokenSecret.name, key: options.tokenSecret.key, optional: true } } }]
        : []),
    ],
    readinessProbe: { httpGet: { path: "/healthz", port: ROUTER_HEALTH_PORT }, periodSeconds: 2 },
    securityContext: {
      runAsUser: 10001, runAsGroup: 10001, runAsNonRoot: true, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true,
      capabilities: { drop: ["ALL"] },
    },
    resources: { requests: { cpu: "10m", memory: "48Mi" }, limits: { cpu: "1", memory: "256Mi" } },
  };
}

/**
 * The patch that injects the router into `pod`, or `[]` when the pod does not ask for it,
 * has it already (so a pod mutated twice is unchanged), or cannot have it (`decide` says why).
 */
export function injectRouter(pod: Pod, options: InjectOptions): AddOperation[] {
  const namespace = pod.metadata?.namespace || options.namespace || "default";
  const decision = decide(pod, namespace);
  if (!decision.inject) return [];
  const ops: AddOperation[] = [];
  // A pod that asks has annotations: the map is there to add to.
  const annotate = (key: string, value: string) => ops.push({ op: "add", path: `/metadata/annotations/${pointer(key)}`, value });
  annotate(STATUS_ANNOTATION, "injected");
  const firstApp = pod.spec?.containers?.[0]?.name;
  if (firstApp && !pod.metadata?.annotations?.[DEFAULT_CONTAINER_ANNOTATION]) annotate(DEFAULT_CONTAINER_ANNOTATION, firstApp);
  // First, so the capture is in place before any other init container runs.
  const init = initContainer(options, decision.ports);
  if (pod.spec?.initContainers) ops.push({ op: "add", path: "/spec/initContainers/0", value: init });
  else ops.push({ op: "add", path: "/spec/initContainers", value: [init] });
  ops.push({ op: "add", path: "/spec/containers/-", value: sidecar(options, decision.workload, decision.ports) });
  return ops;
}
