// The runner's configuration, read from environment variables.
import { availableParallelism } from "node:os";
import { join } from "node:path";
import {
  DEFAULT_IOCONTEXT_LISTEN, DEFAULT_RECENT_BYTES, clientTlsFromEnv, commonConfig, envBool, envDuration, envInt, envString,
  type ClientTls, type Env, type NatsAuth,
} from "@ephemera/kit";
import { HOST_ENV_PASSED, type StepSandbox } from "./driver/step-env.js";
import { DEFAULT_AGENT_RESOURCES, DEFAULT_MAIN_RESOURCES, type Resources } from "./driver/kube/pod.js";
import {
  DEFAULT_STEP_DENY, DEFAULT_STEP_SUBNETS, STEP_NETWORK_MODES, stepDeny, stepDns, stepSubnets, type Cidr, type StepNetworkMode,
} from "./driver/network-plan.js";

export const DEFAULT_RUNNER_LISTEN = "127.0.0.1:7403";

export interface RunnerConfig {
  natsUrl: string;
  /** The runner's own: never passed to a step (hostEnv below holds PATH and LANG only). */
  natsAuth?: NatsAuth;
  prefix: string;
  /** EPHEMERA_STREAM_REPLICAS, for the streams the runner creates. */
  streamReplicas?: number;
  cluster: string;
  /** Steps run at once. */
  concurrency: number;
  driver: "process" | "kubernetes";
  /** The Kubernetes driver's settings (EPHEMERA_RUNNER_DRIVER=kubernetes). */
  kube?: KubeConfigSettings;
  /** host:port of the IO context service. */
  iocontextAddr: string;
  /** TLS to the IO context, as the steps dial it (EPHEMERA_TLS, EPHEMERA_TLS_CA, ...); absent: plaintext. */
  iocontextTls?: ClientTls;
  /** Per-run directories of the process driver live under `<workdir>/runs`. */
  workdir: string;
  /** gRPC health of the runner. */
  listen: string;
  runnerId: string;
  /** ephemera-launch, which the process driver starts for each step. */
  launcher: string;
  /** Variables passed through to every script: PATH and LANG, nothing else of the runner's. */
  hostEnv: Record<string, string>;
  /**
   * The scripts' user and quota. runnerConfig: uid/gid EPHEMERA_STEP_UID/GID (default
   * 65534, nobody/nogroup, when the runner is root; unchanged otherwise), each private view
   * and /tmp a tmpfs of EPHEMERA_STEP_TMP_SIZE bytes (default 256 MiB), the rest of the host
   * read-only when the script changes user (EPHEMERA_STEP_HOST_READONLY, default true). Absent: as the runner, no quota.
   */
  stepSandbox?: StepSandbox;
  /**
   * The steps' network (EPHEMERA_STEP_NETWORK, default outside; see driver/network.ts):
   * outside = a namespace of its own, out through the host's NAT, the host unreachable;
   * none = loopback only; host = the runner's own network. Absent: outside.
   */
  stepNetwork?: StepNetworkMode;
  /** EPHEMERA_STEP_SUBNETS: where each runner's /24 for its steps is taken from (default 10.237.0.0/16). */
  stepSubnets?: Cidr;
  /** EPHEMERA_STEP_DNS: the steps' resolvers (default: the host's that a step can reach). */
  stepDns?: string[];
  /**
   * EPHEMERA_STEP_DENY: where steps may not connect to, besides the host and link-local
   * (default: the private ranges and CGNAT's; absent here: that default).
   */
  stepDeny?: Cidr[];
  /** Steps run at this nice level (EPHEMERA_STEP_NICE, default 10; 0 leaves it alone). */
  stepNiceness?: number;
  /**
   * EPHEMERA_RUNNER_RECENT_BYTES: the process driver holds the outputs of the steps it ran, up
   * to this many bytes, for the steps that read them next (default 64 MiB; 0: none held, every
   * such input is read from the output journal).
   */
  recentBytes?: number;
  /** Between SIGTERM and SIGKILL when a step is cancelled. */
  cancelGraceMs?: number;
  /** How long running steps may go on after SIGTERM to the runner. */
  shutdownGraceMs?: number;
  heartbeatMs?: number;
  /** How long a run's claim lasts unrenewed (default six heartbeats): after that, a runner holding its redelivery declares it lost. */
  claimTtlMs?: number;
  /** How long step logs are kept (EPHEMERA_LOG_RETENTION, default 7 days): the log stream's max age, set by the runner. */
  logRetentionMs?: number;
}

export interface KubeConfigSettings {
  /** EPHEMERA_KUBE_NAMESPACE: runner pods of plugins that name no runner.namespace (default "default"). */
  namespace: string;
  /** EPHEMERA_AGENT_IMAGE: the image of ephemera-init and ephemera-sidecar. */
  agentImage: string;
  /**
   * EPHEMERA_ROUTING_MESH: none (default), or istio: each baseline Service with forks gets
   * a VirtualService sending its sandboxes' routing keys to their fork Services.
   */
  routingMesh: RoutingMesh;
  /** EPHEMERA_POD_IOCONTEXT: the IO context's host:port as pods reach it (default: the runner's own address of it). */
  podIOContext: string;
  /**
   * EPHEMERA_POD_JOBS: the JobAgent service's host:port as job runner groups' pods reach it;
   * empty (default): this runner keeps no pods for job runner groups (docs/jobs.md, "Pods").
   */
  podJobs: string;
  /** EPHEMERA_KUBE_IMAGE_PULL_GRACE_MS, EPHEMERA_KUBE_NODE_LOST_GRACE_MS: how long a failing pull, or a pod Unknown, is given. */
  imagePullGraceMs: number;
  nodeLostGraceMs: number;
  /**
   * EPHEMERA_KUBE_MAIN_REQUESTS, EPHEMERA_KUBE_MAIN_LIMITS, EPHEMERA_KUBE_AGENT_REQUESTS,
   * EPHEMERA_KUBE_AGENT_LIMITS (`cpu=100m,memory=128Mi`; empty: none): the containers'
   * defaults, which a plugin's overlay overrides. Absent: the pod builder's.
   */
  resources?: { main?: Resources; agents?: Resources };
}

export const DEFAULT_AGENT_IMAGE = "ephemera/agent:0.1.0";
/** Pods mostly wait (on images, on the cluster): more of them at once than a machine has cores. */
export const DEFAULT_KUBE_CONCURRENCY = 16;

export interface ConfigDefaults {
  launcher: string;
  /** Where the work directory goes by default, as `<workRoot>/ephemera/<prefix>` (see defaultWorkRoot). */
  workRoot: string;
  runnerId: string;
  /** The runner's own uid (process.getuid()): steps leave root by default. */
  uid?: number;
}

export const NOBODY = 65534;
export const DEFAULT_STEP_TMP_SIZE = 256 * 1024 * 1024;

/** The scripts' user (see RunnerConfig.stepSandbox) and quota; a uid is only changed by root. */
export function stepSandboxConfig(env: Env, runnerUid: number | undefined): StepSandbox {
  const root = runnerUid === 0;
  const uid = root ? envInt(env, "EPHEMERA_STEP_UID", NOBODY) : undefined;
  if (!root && (env["EPHEMERA_STEP_UID"] || env["EPHEMERA_STEP_GID"])) {
    throw new Error("EPHEMERA_STEP_UID/EPHEMERA_STEP_GID need the runner to run as root");
  }
  const tmpSizeBytes = envInt(env, "EPHEMERA_STEP_TMP_SIZE", DEFAULT_STEP_TMP_SIZE);
  if (tmpSizeBytes < 1024 * 1024) throw new Error(`EPHEMERA_STEP_TMP_SIZE must be at least 1 MiB (1048576 bytes), got ${tmpSizeBytes}`);
  return {
    ...(uid === undefined ? {} : { uid, gid: envInt(env, "EPHEMERA_STEP_GID", uid === NOBODY ? NOBODY : uid) }),
    // Only root can remount; a script that stays root could undo it, so it goes with a change of user.
    ...(root && uid !== 0 && envBool(env, "EPHEMERA_STEP_HOST_READONLY", true) ? { readOnlyHost: true } : {}),
    tmpSizeBytes,
  };
}

export function runnerConfig(env: Env, defaults: ConfigDefaults): RunnerConfig {
  const { natsUrl, natsAuth, prefix, streamReplicas } = commonConfig(env);
  const driver = envString(env, "EPHEMERA_RUNNER_DRIVER", "process");
  if (driver !== "process" && driver !== "kubernetes") throw new Error(`EPHEMERA_RUNNER_DRIVER "${driver}" is not available (drivers: process, kubernetes)`);
  if (driver !== "kubernetes" && env["EPHEMERA_ROUTING_MESH"] && env["EPHEMERA_ROUTING_MESH"] !== "none") {
    throw new Error(`EPHEMERA_ROUTING_MESH=${env["EPHEMERA_ROUTING_MESH"]} needs EPHEMERA_RUNNER_DRIVER=kubernetes (the process driver runs no forks to route)`);
  }
  const iocontextAddr = envString(env, "EPHEMERA_IOCONTEXT_ADDR", envString(env, "EPHEMERA_IOCONTEXT_LISTEN", DEFAULT_IOCONTEXT_LISTEN));
  const hostEnv: Record<string, string> = {};
  const iocontextTls = clientTlsFromEnv(env);
  for (const name of HOST_ENV_PASSED) if (env[name]) hostEnv[name] = env[name];
  return {
    natsUrl,
    ...(natsAuth ? { natsAuth } : {}),
    prefix,
    streamReplicas,
    cluster: envString(env, "EPHEMERA_CLUSTER", "local"),
    // As many steps at once as the machine has cores: more starves the services (the API
    // above all) of a small machine (docs/performance.md). Steps that mostly wait may want more.
    concurrency: Math.max(1, envInt(env, "EPHEMERA_RUNNER_CONCURRENCY", driver === "kubernetes" ? DEFAULT_KUBE_CONCURRENCY : Math.max(2, availableParallelism()))),
    stepNiceness: Math.min(19, Math.max(0, envInt(env, "EPHEMERA_STEP_NICE", 10))),
    recentBytes: Math.max(0, envInt(env, "EPHEMERA_RUNNER_RECENT_BYTES", DEFAULT_RECENT_BYTES)),
    driver,
    ...(driver === "kubernetes" ? {
      kube: {
        namespace: envString(env, "EPHEMERA_KUBE_NAMESPACE", "default"),
        agentImage: envString(env, "EPHEMERA_AGENT_IMAGE", DEFAULT_AGENT_IMAGE),
        podIOContext: envString(env, "EPHEMERA_POD_IOCONTEXT", iocontextAddr),
        podJobs: envString(env, "EPHEMERA_POD_JOBS", ""),
        routingMesh: routingMesh(env),
        imagePullGraceMs: envInt(env, "EPHEMERA_KUBE_IMAGE_PULL_GRACE_MS", 15_000),
        nodeLostGraceMs: envInt(env, "EPHEMERA_KUBE_NODE_LOST_GRACE_MS", 15_000),
        ...podResources(env),
      },
    } : {}),
    iocontextAddr,
    ...(iocontextTls ? { iocontextTls } : {}),
    workdir: envString(env, "EPHEMERA_RUNNER_WORKDIR", join(defaults.workRoot, "ephemera", prefix)),
    listen: envString(env, "EPHEMERA_RUNNER_LISTEN", DEFAULT_RUNNER_LISTEN),
    runnerId: defaults.runnerId,
    launcher: defaults.launcher,
    hostEnv,
    stepSandbox: stepSandboxConfig(env, defaults.uid ?? process.getuid?.()),
    ...stepNetworkConfig(env),
    shutdownGraceMs: envInt(env, "EPHEMERA_RUNNER_SHUTDOWN_GRACE_MS", 30_000),
    logRetentionMs: logRetention(env),
  };
}

export const ROUTING_MESHES = ["none", "istio"] as const;
export type RoutingMesh = (typeof ROUTING_MESHES)[number];

/** EPHEMERA_ROUTING_MESH: the mesh whose routes the fork reconciler keeps (none, istio). */
export function routingMesh(env: Env): RoutingMesh {
  const mesh = envString(env, "EPHEMERA_ROUTING_MESH", "none");
  if (!(ROUTING_MESHES as readonly string[]).includes(mesh)) {
    throw new Error(`EPHEMERA_ROUTING_MESH must be one of ${ROUTING_MESHES.join(", ")}, got "${mesh}"`);
  }
  return mesh as RoutingMesh;
}

/** EPHEMERA_STEP_NETWORK, EPHEMERA_STEP_SUBNETS, EPHEMERA_STEP_DNS and EPHEMERA_STEP_DENY. */
export function stepNetworkConfig(env: Env): Pick<RunnerConfig, "stepNetwork" | "stepSubnets" | "stepDns" | "stepDeny"> {
  const mode = envString(env, "EPHEMERA_STEP_NETWORK", "outside");
  if (!(STEP_NETWORK_MODES as readonly string[]).includes(mode)) {
    throw new Error(`EPHEMERA_STEP_NETWORK must be one of ${STEP_NETWORK_MODES.join(", ")}, got "${mode}"`);
  }
  const dns = stepDns(env["EPHEMERA_STEP_DNS"]);
  return {
    stepNetwork: mode as StepNetworkMode,
    stepSubnets: stepSubnets(envString(env, "EPHEMERA_STEP_SUBNETS", DEFAULT_STEP_SUBNETS)),
    stepDeny: stepDeny(envString(env, "EPHEMERA_STEP_DENY", DEFAULT_STEP_DENY)),
    ...(dns ? { stepDns: dns } : {}),
  };
}

export const DEFAULT_LOG_RETENTION = "7d";
/** The stream's max age is in nanoseconds (an int64 at JetStream, 292 years): ten years is far inside it. */
const LOG_RETENTION_LIMITS = { minMs: 1000, maxMs: 3650 * 86_400_000 };

/** EPHEMERA_LOG_RETENTION: a duration such as 7d, 36h, 1d12h or 90m (at least 1 s, at most 3650 days). */
export function logRetention(env: Env): number {
  return envDuration(env, "EPHEMERA_LOG_RETENTION", DEFAULT_LOG_RETENTION, LOG_RETENTION_LIMITS);
}

/** A Kubernetes quantity: a decimal with an SI or binary suffix, or an exponent. */
const QUANTITY = /^(\d+(\.\d*)?|\.\d+)([numkMGTPE]|[KMGTPE]i|[eE][+-]?\d+)?$/;

/** `cpu=100m,memory=128Mi` as a resource list; empty: none. */
function resourceList(env: Env, name: string): Record<string, string> {
  const list: Record<string, string> = {};
  for (const item of (env[name] ?? "").split(",").map((i) => i.trim()).filter(Boolean)) {
    const eq = item.indexOf("=");
    if (eq <= 0) throw new Error(`${name}: "${item}" is not name=quantity (e.g. cpu=100m,memory=128Mi)`);
    const [resource, quantity] = [item.slice(0, eq).trim(), item.slice(eq + 1).trim()];
    if (!QUANTITY.test(quantity)) {
      throw new Error(`${name}: "${quantity}" (${resource}) is not a Kubernetes quantity (e.g. 500m, 2, 128Mi, 1Gi)`);
    }
    list[resource] = quantity;
  }
  return list;
}

/** The runner pods' default requests and limits, for each container whose variables are set. */
function podResources(env: Env): { resources?: { main?: Resources; agents?: Resources } } {
  const one = (container: "MAIN" | "AGENT", defaults: Resources): Resources | undefined => {
    const [requests, limits] = [`EPHEMERA_KUBE_${container}_REQUESTS`, `EPHEMERA_KUBE_${container}_LIMITS`];
    if (env[requests] === undefined && env[limits] === undefined) return undefined;
    const pick = (name: string, fallback: Record<string, string> | undefined) => {
      const list = env[name] === undefined ? fallback ?? {} : resourceList(env, name);
      return Object.keys(list).length ? list : undefined;
    };
    const r = pick(requests, defaults.requests);
    const l = pick(limits, defaults.limits);
    return { ...(r ? { requests: r } : {}), ...(l ? { limits: l } : {}) };
  };
  const main = one("MAIN", DEFAULT_MAIN_RESOURCES);
  const agents = one("AGENT", DEFAULT_AGENT_RESOURCES);
  return main || agents ? { resources: { ...(main ? { main } : {}), ...(agents ? { agents } : {}) } } : {};
}
