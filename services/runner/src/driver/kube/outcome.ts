// What a runner pod's status says about its step, named within the issue's list:
// Succeeded; Failed (the script's exit code); OOMKilled; Evicted; ImagePullFailed (after a
// grace, since a pull may be retried); ConfigError (e.g. a missing secret); DeadlineExceeded
// (activeDeadlineSeconds); NodeLost (phase Unknown past a grace). Undefined: still running
// or pending, look again on the next watch event. Pure: the clock and graces are given.

export interface ContainerState {
  waiting?: { reason?: string; message?: string };
  running?: { startedAt?: string };
  terminated?: { exitCode: number; reason?: string; message?: string };
}
export interface ContainerStatus { name: string; state?: ContainerState }
export interface PodStatus {
  phase?: "Pending" | "Running" | "Succeeded" | "Failed" | "Unknown";
  reason?: string;
  message?: string;
  initContainerStatuses?: ContainerStatus[];
  containerStatuses?: ContainerStatus[];
}

export type PodOutcome =
  | { kind: "Succeeded" }
  | { kind: "Failed"; exitCode: number; message: string }
  | { kind: "OOMKilled" | "Evicted" | "ImagePullFailed" | "ConfigError" | "DeadlineExceeded" | "NodeLost"; message: string };

export interface Graces {
  /** How long an image pull may keep failing before the step fails (ErrImagePull / ImagePullBackOff). */
  imagePullMs: number;
  /** How long a pod may stay Unknown before its node is taken as lost. */
  unknownMs: number;
}

export const PULL = new Set(["ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"]);
const CONFIG = new Set(["CreateContainerConfigError", "CreateContainerError", "RunContainerError"]);

/** `since`: when the pod was first seen in its current waiting or Unknown condition (ms). */
export function podOutcome(status: PodStatus, now: number, since: number, graces: Graces): PodOutcome | undefined {
  const all = [...(status.initContainerStatuses ?? []), ...(status.containerStatuses ?? [])];
  const main = status.containerStatuses?.find((c) => c.name === "main");
  if (status.reason === "DeadlineExceeded") return { kind: "DeadlineExceeded", message: status.message || "the pod ran past its activeDeadlineSeconds" };
  if (status.reason === "Evicted") return { kind: "Evicted", message: status.message || "the pod was evicted" };
  const oom = all.find((c) => c.state?.terminated?.reason === "OOMKilled");
  if (oom) return { kind: "OOMKilled", message: `container ${oom.name} was killed for using too much memory (OOMKilled)` };
  for (const c of all) {
    const w = c.state?.waiting;
    if (w?.reason && CONFIG.has(w.reason)) return { kind: "ConfigError", message: `container ${c.name}: ${w.reason}${w.message ? `: ${w.message}` : ""}` };
    if (w?.reason && PULL.has(w.reason) && now - since >= graces.imagePullMs) {
      return { kind: "ImagePullFailed", message: `container ${c.name}: ${w.reason}${w.message ? `: ${w.message}` : ""}` };
    }
  }
  if (status.phase === "Unknown") return now - since >= graces.unknownMs ? { kind: "NodeLost", message: "the pod's node stopped reporting (phase Unknown)" } : undefined;
  const failedInit = status.initContainerStatuses?.find((c) => (c.state?.terminated?.exitCode ?? 0) !== 0);
  if (failedInit) {
    const t = failedInit.state!.terminated!;
    return { kind: "Failed", exitCode: t.exitCode, message: `init container ${failedInit.name} exited with code ${t.exitCode}${t.message ? `: ${t.message}` : ""}` };
  }
  const ended = main?.state?.terminated;
  if (status.phase === "Succeeded" || status.phase === "Failed") {
    if (ended && ended.exitCode !== 0) return { kind: "Failed", exitCode: ended.exitCode, message: `script exited with code ${ended.exitCode}` };
    if (status.phase === "Succeeded") return { kind: "Succeeded" };
    const other = all.find((c) => (c.state?.terminated?.exitCode ?? 0) !== 0);
    const code = other?.state?.terminated?.exitCode ?? 1;
    return { kind: "Failed", exitCode: code, message: other ? `container ${other.name} exited with code ${code}` : status.message || "the pod failed" };
  }
  return undefined;
}
