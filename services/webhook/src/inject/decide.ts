// Whether a pod gets the router, and what it captures: pure, so the webhook, the kubectl
// patch and the tests read one rule.
import {
  FIRST_LISTEN_PORT, INJECT_ANNOTATION, ROUTER_CONTAINER, ROUTER_HEALTH_PORT, SIGNADOT_INJECT_ANNOTATION, podLabel, type Container, type Pod,
} from "./pod.js";
import { workloadOf } from "./workload.js";

/** An app port and the router listener its inbound traffic is redirected to. */
export interface PortMapping {
  app: number;
  listen: number;
}

export type Decision =
  | { inject: true; workload: string; ports: PortMapping[] }
  /** Not asked for, or injected already: nothing to say. */
  | { inject: false; reason: "not-asked" | "injected" }
  /** Asked for but not possible; `warning` says why, for the one who created the pod. */
  | { inject: false; reason: "no-ports" | "no-workload"; warning: string };

/** `sidecar.ephemera.dev/inject` when set, else Signadot's `sidecar.signadot.com/inject`; "true" asks. */
export function asksForRouter(pod: Pod): boolean {
  const annotations = pod.metadata?.annotations ?? {};
  const asked = annotations[INJECT_ANNOTATION] ?? annotations[SIGNADOT_INJECT_ANNOTATION];
  return asked?.trim().toLowerCase() === "true";
}

export const isInjected = (pod: Pod) => (pod.spec?.containers ?? []).some((c) => c.name === ROUTER_CONTAINER);

/**
 * Every TCP containerPort of the app containers, once each, with its listener: 15000, 15001, …
 * skipping a port the app itself uses and the router's health port.
 */
export function portMappings(containers: Container[]): PortMapping[] {
  const apps = [...new Set(containers.flatMap((c) => c.ports ?? [])
    .filter((p) => (p.protocol ?? "TCP").toUpperCase() === "TCP" && Number.isInteger(p.containerPort) && p.containerPort! > 0)
    .map((p) => p.containerPort!))];
  const taken = new Set([...apps, ROUTER_HEALTH_PORT]);
  let next = FIRST_LISTEN_PORT;
  return apps.map((app) => {
    while (taken.has(next)) next++;
    taken.add(next);
    return { app, listen: next };
  });
}

export function decide(pod: Pod, namespace: string): Decision {
  if (!asksForRouter(pod)) return { inject: false, reason: "not-asked" };
  if (isInjected(pod)) return { inject: false, reason: "injected" };
  const notInjected = `${ROUTER_CONTAINER} not injected into ${podLabel(pod, namespace)}`;
  const ports = portMappings(pod.spec?.containers ?? []);
  if (!ports.length) {
    return {
      inject: false, reason: "no-ports",
      warning: `${notInjected}: its containers declare no TCP containerPort, so there is no traffic to capture (declare the ports its Services target)`,
    };
  }
  const workload = workloadOf(pod, namespace);
  if ("problem" in workload) return { inject: false, reason: "no-workload", warning: `${notInjected}: ${workload.problem}` };
  return { inject: true, workload: workload.workload, ports };
}
