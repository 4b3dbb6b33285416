// The simulator's stand-in for the Deployment, StatefulSet and Argo Rollout controllers: it runs no pods
// for them, but reports each generation rolled out and available, as a healthy cluster
// soon would, so that whoever waits for a workload to be available (forks) gets an answer.
// A workload annotated `sim.ephemera.dev/unavailable: "true"` is reported never available.
import { findType } from "../resources.js";
import type { Change, Obj, Store } from "../store.js";

export const UNAVAILABLE = "sim.ephemera.dev/unavailable";
/** Also never available, and past its progress deadline: the controller gives up on it. */
export const DEADLINE_EXCEEDED = "sim.ephemera.dev/progress-deadline-exceeded";
const KINDS = new Set(["apps/v1/deployments", "apps/v1/statefulsets", "argoproj.io/v1alpha1/rollouts"]);

export function startWorkloadController(store: Store): () => void {
  return store.subscribe((c: Change) => {
    if (c.type === "DELETED" || !KINDS.has(c.resource)) return;
    const obj = c.object as Obj & { spec?: { replicas?: number }; status?: { observedGeneration?: number; availableReplicas?: number } };
    const generation = Number(obj.metadata.generation ?? 1);
    const deadlineExceeded = obj.metadata.annotations?.[DEADLINE_EXCEEDED] === "true";
    const unavailable = obj.metadata.annotations?.[UNAVAILABLE] === "true" || deadlineExceeded;
    const replicas = obj.spec?.replicas ?? 1;
    // Answered already, unless the annotation changed since (it is the simulator's own switch).
    const conditions = (obj.status as { conditions?: Array<{ type: string; status: string }> } | undefined)?.conditions ?? [];
    const gaveUp = conditions.some((x) => x.type === "Progressing" && x.status === "False");
    if (obj.status?.observedGeneration === generation && obj.status.availableReplicas === (unavailable ? 0 : replicas) && gaveUp === deadlineExceeded) return;
    const [group, version, plural] = c.resource.split("/");
    const type = findType(group!, version!, plural!)!;
    const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    // After the change is recorded, as a controller would answer it.
    queueMicrotask(() => store.put(type, {
      ...obj,
      status: {
        observedGeneration: generation, replicas, updatedReplicas: replicas,
        readyReplicas: unavailable ? 0 : replicas, availableReplicas: unavailable ? 0 : replicas,
        ...(unavailable ? { unavailableReplicas: replicas } : {}),
        ...(type.kind === "Rollout" ? { phase: unavailable ? "Degraded" : "Healthy" } : {}),
        conditions: [
          { type: "Available", status: unavailable ? "False" : "True", reason: unavailable ? "MinimumReplicasUnavailable" : "MinimumReplicasAvailable", lastTransitionTime: now, lastUpdateTime: now },
          deadlineExceeded
            ? { type: "Progressing", status: "False", reason: "ProgressDeadlineExceeded", message: `ReplicaSet "${obj.metadata.name}" has timed out progressing.`, lastTransitionTime: now, lastUpdateTime: now }
            : { type: "Progressing", status: "True", reason: "NewReplicaSetAvailable", lastTransitionTime: now, lastUpdateTime: now },
        ],
      },
    } as Obj));
  });
}
