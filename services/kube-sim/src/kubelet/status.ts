// Pure pieces of a pod's status as the kubelet reports it: container states, conditions
// and the pod phase, in the shapes Kubernetes clients read.

export type ContainerState =
  | { waiting: { reason: string; message?: string } }
  | { running: { startedAt: string } }
  | { terminated: { exitCode: number; signal?: number; reason: string; message?: string; startedAt: string; finishedAt: string; containerID?: string } };

export interface ContainerStatus {
  name: string;
  state: ContainerState;
  lastState: ContainerState | Record<string, never>;
  ready: boolean;
  restartCount: number;
  image: string;
  imageID: string;
  containerID?: string;
  started: boolean;
}

export const isRunning = (c: ContainerStatus) => "running" in c.state;
export const isTerminated = (c: ContainerStatus): c is ContainerStatus & { state: { terminated: { exitCode: number } } } => "terminated" in c.state;
/** Started at least once (running now, or ended). */
export const hasStarted = (c: ContainerStatus) => !("waiting" in c.state) || c.restartCount > 0;

export interface Condition { type: string; status: "True" | "False"; reason?: string; message?: string; lastTransitionTime: string; lastProbeTime: null }

/** Conditions from the containers; a condition keeps its transition time while its status holds. */
export function conditions(inits: ContainerStatus[], mains: ContainerStatus[], completed: boolean, previous: Condition[], now: string, scheduledAt: string): Condition[] {
  const prev = (type: string) => previous.find((c) => c.type === type);
  const cond = (type: string, ok: boolean, reason?: string, message?: string): Condition => {
    const p = prev(type);
    const status = ok ? "True" : "False";
    return { type, status, ...(!ok && reason ? { reason } : ok && completed && reason === "PodCompleted" ? { reason } : {}), ...(!ok && message ? { message } : {}),
      lastTransitionTime: p && p.status === status ? p.lastTransitionTime : now, lastProbeTime: null };
  };
  const initPending = inits.filter((c) => !(isTerminated(c) && c.state.terminated.exitCode === 0)).map((c) => c.name);
  const unready = mains.filter((c) => !c.ready).map((c) => c.name);
  const readyReason = completed ? "PodCompleted" : "ContainersNotReady";
  return [
    { type: "PodScheduled", status: "True", lastTransitionTime: prev("PodScheduled")?.lastTransitionTime ?? scheduledAt, lastProbeTime: null },
    cond("Initialized", initPending.length === 0, "ContainersNotInitialized", `containers with incomplete status: [${initPending.join(" ")}]`),
    cond("Ready", unready.length === 0, readyReason, `containers with unready status: [${unready.join(" ")}]`),
    cond("ContainersReady", unready.length === 0, readyReason, `containers with unready status: [${unready.join(" ")}]`),
  ];
}

