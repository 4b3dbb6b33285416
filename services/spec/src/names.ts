// The naming rules of plugin and sandbox files, in one place: the validator, the JSON
// schemas and docs/plugins.md all read them from here.

/** DNS-label-like: a letter first, letters/digits/'-', alphanumeric last. */
export const LABEL_NAME = /^[a-zA-Z]([a-zA-Z0-9-]*[a-zA-Z0-9])?$/;
/** Step, input and output names: no dots, since `<step>.<output>` keys and subjects use dots. */
export const STEP_NAME = /^[a-zA-Z][a-zA-Z0-9_-]*$/;
/** Env vars a step's inputs map to (POSIX shell names). */
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Env vars of forked workloads: what Kubernetes accepts. */
export const WORKLOAD_ENV_NAME = /^[-._a-zA-Z][-._a-zA-Z0-9]*$/;
/** A cluster name travels in NATS subjects (`<prefix>.run.<cluster>`): no dots, no wildcards. */
export const CLUSTER_NAME = /^[a-zA-Z0-9]([a-zA-Z0-9_-]*[a-zA-Z0-9])?$/;
/** Template variables (`@{name}`). */
export const VAR_NAME = /^[a-zA-Z][a-zA-Z0-9_.-]*$/;

const DAY_MS = 86_400_000;

/**
 * The longest durations a file or a command line may give, in milliseconds. Timers chain
 * past setTimeout's 24.8 days, but what a duration ends in must still be a time (a TTL's
 * deletion time, a run's deadline and its token's expiry), and no sandbox, step or wait
 * should outlive a year.
 */
export const MAX_DURATION_MS = {
  /** `spec.ttl.duration` of a sandbox. */
  ttl: 365 * DAY_MS,
  /** A step's `timeout`. */
  stepTimeout: 365 * DAY_MS,
  /** `eph … --wait-timeout`. */
  wait: 365 * DAY_MS,
  /** `eph logs --since`. */
  logsSince: 365 * DAY_MS,
  /** A runner group's `jobTimeout`: jobs are tests, not services. */
  jobTimeout: 7 * DAY_MS,
} as const;

/** A job's `namePrefix`: the generated name adds `-` and a random part. */
export const JOB_NAME_PREFIX = /^[a-zA-Z0-9_-]*$/;
/** A runner group's `jobTimeout` when it gives none. */
export const DEFAULT_JOB_TIMEOUT_MS = 30 * 60_000;
/** The most pods a runner group keeps (each is a pod of the cluster's, always running). */
export const MAX_DESIRED_PODS = 64;

/** A limit as a description gives it, with the longest value in `unit`: `at most 365 days (8760h)`. */
export function durationLimitWords(maxMs: number, unit: "h" | "d"): string {
  return `at most ${maxMs / DAY_MS} days (${maxMs / (unit === "h" ? 3_600_000 : DAY_MS)}${unit})`;
}

export const MAX_BYTES = {
  pluginName: 253,
  sandboxName: 30,
  resourceName: 63,
  stepName: 63,
  clusterName: 63,
  /** A step's script: a program, not a payload. */
  script: 256 * 1024,
  podTemplateOverlay: 64 * 1024,
  labelKey: 63,
  labelValue: 255,
  paramValue: 64 * 1024,
  jobNamePrefix: 32,
  /** A runner group's podTemplate, as JSON. */
  podTemplate: 64 * 1024,
  /** One argument of a job's command. */
  commandArg: 64 * 1024,
} as const;

/**
 * A whole spec, as JSON: it travels in one event (NATS takes 1 MiB a message by default),
 * and a sandbox's params travel twice (its spec and its resolved resources).
 */
export const MAX_SPEC_BYTES = { plugin: 900 * 1024, sandbox: 256 * 1024, job: 512 * 1024 } as const;

/** How many of each a file may list (the events that carry them must fit one message). */
export const MAX_COUNT = {
  resources: 32,
  stepsPerPhase: 64,
  inputs: 64,
  outputs: 64,
  labels: 64,
  params: 64,
  commandArgs: 256,
  artifacts: 32,
} as const;

export const MAX_RETRIES = 10;

/** Set by the runner for every step; an input may not take them over. */
export const RESERVED_ENV = [
  "SIGNADOT_SANDBOX_NAME",
  "SIGNADOT_SANDBOX_ROUTING_KEY",
  "SIGNADOT_RESOURCE_NAME",
  "SIGNADOT_SANDBOX_ID",
] as const;
export const RESERVED_ENV_PREFIX = "EPHEMERA_";

/** The container that runs the script, and the agents' containers an overlay may not take. */
export const MAIN_CONTAINER = "main";
export const RESERVED_CONTAINERS = ["ephemera-init", "ephemera-sidecar"] as const;

export const TTL_OFFSETS = ["createdAt", "updatedAt"] as const;
export const ENV_OPERATIONS = ["upsert", "delete"] as const;
export const PATCH_TYPES = ["strategic", "merge", "json"] as const;

const utf8 = new TextEncoder();
export function byteLength(s: string): number {
  return utf8.encode(s).length;
}

export function isReservedEnv(name: string): boolean {
  return (RESERVED_ENV as readonly string[]).includes(name) || name.startsWith(RESERVED_ENV_PREFIX);
}

/** Env var for an input without `as`: upper-cased, `-` → `_`. */
export function stepEnvName(input: string): string {
  return input.toUpperCase().replaceAll("-", "_");
}

/** A spec over its size limit is refused as a whole (its parts may each be within theirs). */
export function checkSpecSize(spec: unknown, max: number, what: string, out: { add(path: readonly (string | number)[], rule: "too-long", message: string): void }): void {
  const size = byteLength(JSON.stringify(spec) ?? "");
  if (size > max) out.add(["spec"], "too-long", `the ${what} spec is ${size} bytes as JSON, over the ${max}-byte limit`);
}
