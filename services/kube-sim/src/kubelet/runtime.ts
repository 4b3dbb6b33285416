// What the pod runner asks of a container runtime: a sandbox per pod (its network and
// addresses), containers started in it, signalled, and waited for. The process runtime
// runs containers as host processes (process-runtime.ts); the docker runtime as Docker
// containers sharing a pause container's network namespace (docker-runtime.ts).
import { ConfigError } from "./env.js";
import type { Mount } from "./launch.js";

type Rec = Record<string, unknown>;

export interface ContainerLaunch {
  name: string;
  image: string;
  /** Command and args expanded; command undefined means the image's ENTRYPOINT, args undefined its CMD. */
  command: string[] | undefined;
  args: string[] | undefined;
  env: Record<string, string>;
  workingDir: string | undefined;
  /** The pod's securityContext overlaid with the container's. */
  securityContext: Rec;
  resources: Rec;
  mounts: Mount[];
  /** A host directory of the container's own, kept across its restarts: the process runtime's launcher status and private /tmp. */
  runDir: string;
  logFile: string;
}

/** How a container ended, as containerStatuses[].state.terminated reports it. */
export interface ContainerExit {
  exitCode: number;
  /** The signal number that ended it. */
  signal?: number;
  /** Killed by the kernel's OOM killer at the container's memory limit. */
  oomKilled?: boolean;
  /** It never ran its command (not found, not executable): reason StartError, with this message. */
  startError?: string;
}

export interface RunningContainer {
  /** `containerd://…` or `docker://…`, as in containerStatuses[].containerID. */
  id: string;
  exited: Promise<ContainerExit>;
  /** TERM or KILL to the container (its whole process group, or its pid 1 and children). */
  signal(signal: "SIGTERM" | "SIGKILL"): void;
}

export interface PodSandbox {
  podIP: string;
  hostIP: string;
  /**
   * Starts a container; throws ConfigError (CreateContainerConfigError: a user the runtime
   * refuses, such as root), CreateContainerError or ImagePullError.
   */
  start(launch: ContainerLaunch): Promise<RunningContainer>;
  /** Removes what is left of the pod (its pause container); its containers have exited. */
  remove(): Promise<void>;
}

export interface PodIdentity { uid: string; namespace: string; name: string; spec: Rec }

export interface ContainerRuntime {
  readonly name: "process" | "docker";
  sandbox(pod: PodIdentity): Promise<PodSandbox>;
  /** kube-sim stops: removes whatever is left of every pod. */
  stop(): Promise<void>;
}

/** The container cannot be created from its spec (no command, a refused option): CreateContainerError. */
export class CreateContainerError extends ConfigError {
  override readonly name: string = "CreateContainerError";
}

/** The image cannot be had: the container waits with ErrImagePull, then ImagePullBackOff. */
export class ImagePullError extends Error {
  override readonly name = "ImagePullError";
}
export const isImagePullError = (err: unknown): err is ImagePullError => err instanceof ImagePullError;
