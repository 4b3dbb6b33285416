// Which baseline workload a pod belongs to, as the Routes API names it (`Kind/namespace/name`):
// the router asks for that workload's rules. Pure.
import { FORK_KINDS } from "@ephemera/kit/fork-name";
import { WORKLOAD_ANNOTATION, type Pod } from "./pod.js";

export type WorkloadOf = { workload: string } | { problem: string };

/** The kinds a sandbox forks, so the only ones with routing rules; the router takes no other. */
export const ROUTED_KINDS = FORK_KINDS;
const NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
const routed = (kind: string) => (ROUTED_KINDS as readonly string[]).includes(kind);
const notRouted = (what: string) =>
  `${what}, and only ${ROUTED_KINDS.join(", ")} are forked and routed (set the annotation ${WORKLOAD_ANNOTATION}: Kind/name to name one)`;

/**
 * The annotation `sidecar.ephemera.dev/workload: Kind/name` when set; else the pod's
 * controller: a ReplicaSet of a Deployment (its name less `-<pod-template-hash>`) or of an
 * Argo Rollout (less `-<rollouts-pod-template-hash>`), a StatefulSet by its own name. A pod
 * owned by anything else (a Job, a DaemonSet, a bare ReplicaSet) or by nothing has none.
 */
export function workloadOf(pod: Pod, namespace: string): WorkloadOf {
  const meta = pod.metadata ?? {};
  const override = meta.annotations?.[WORKLOAD_ANNOTATION];
  if (override !== undefined) {
    const [kind, name, ...rest] = override.split("/");
    if (rest.length || !kind || !name || !routed(kind) || !NAME.test(name) || name.length > 253) {
      return { problem: `annotation ${WORKLOAD_ANNOTATION} must be Kind/name with Kind one of ${ROUTED_KINDS.join(", ")} (e.g. Deployment/orders), not "${override}"` };
    }
    return { workload: `${kind}/${namespace}/${name}` };
  }
  const owners = meta.ownerReferences ?? [];
  const owner = owners.find((o) => o.controller) ?? owners[0];
  if (!owner?.kind || !owner.name) {
    return { problem: `it has no owner to route for: set the annotation ${WORKLOAD_ANNOTATION}: Kind/name` };
  }
  if (owner.kind === "ReplicaSet") {
    const labels = meta.labels ?? {};
    for (const [label, kind] of [["rollouts-pod-template-hash", "Rollout"], ["pod-template-hash", "Deployment"]] as const) {
      const hash = labels[label];
      if (hash && owner.name.endsWith(`-${hash}`)) return { workload: `${kind}/${namespace}/${owner.name.slice(0, -hash.length - 1)}` };
    }
  }
  if (routed(owner.kind)) return { workload: `${owner.kind}/${namespace}/${owner.name}` };
  return { problem: notRouted(`it belongs to ${owner.kind} ${owner.name}`) };
}
