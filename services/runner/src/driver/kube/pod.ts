// The runner pod of one step attempt (docs/agent.md has the contract): init container
// `ephemera-init` (the agent image) fetches the inputs and script and writes the
// entrypoint into the agent directory; `main` runs the plugin's runner image with that
// entrypoint; sidecar `ephemera-sidecar` stores the outputs and writes the report. The
// agent directory and every directory holding a declared input or output path are
// emptyDirs shared by the three. The run's token is a Secret named after the pod, mounted
// in the agents only. Every container has a securityContext and resources by default
// (docs/kubernetes.md says why main's differ). The plugin's podTemplateOverlay is
// strategic-merged on top; what the driver relies on (name, labels, restartPolicy, the
// agents' commands and securityContext, the token mounted in the agents and nowhere
// else, the entrypoint) is set again after it.
import { createHash } from "node:crypto";
import { posix } from "node:path";
import { parse } from "yaml";
import { DEFAULT_RETRY } from "@ephemera/io-agent";
import { ValidationError, shortHash } from "@ephemera/kit";
import type * as pb from "@ephemera/proto";
import { strategicMerge, type Json } from "./merge.js";

export const AGENT_DIR = "/ephemera";
/** Where the agent image keeps the bundled agent. */
export const AGENT_PROGRAM = "/agent/agent.cjs";
const STEP_HOME = "/tmp";
/** How much longer than the step's timeout the sidecar waits for main's exit code (the pod's deadline comes first). */
const SIDECAR_WAIT_MARGIN_MS = 5 * 60_000;
/**
 * The pod's own deadline is the step's timeout plus the time the init may spend fetching the
 * inputs and the sidecar storing the outputs (their retries through an IO context or NATS
 * failover): the timeout is the script's, which the runner enforces itself (counting from
 * main's start to its end); the pod's deadline is the backstop for a pod nobody follows.
 */
export const OUTPUTS_STORE_GRACE_S = Math.ceil(DEFAULT_RETRY.totalMs / 1000);
/** And the time its init may spend fetching the inputs (the same retries): the timeout counts from main's start. */
export const START_GRACE_S = Math.ceil(DEFAULT_RETRY.totalMs / 1000);
/** Where the agents write their report's summary, which the pod's status carries to the runner. */
export const TERMINATION_MESSAGE_PATH = "/dev/termination-log";
/** The full run id (labels cannot hold it): how a restarted runner knows whose pod it finds. */
export const RUN_ID_ANNOTATION = "ephemera.dev/run-id";
const LABEL = "ephemera.dev";
/** The agent image's user: the agents run as it, never as root. */
export const AGENT_UID = 10001;
const TOKEN_VOLUME = "ephemera-token";
const TOKEN_DIR = "/var/run/secrets/ephemera.dev";
/** Where the agents read the run's token (EPHEMERA_TOKEN_FILE): the token Secret's one key. */
export const TOKEN_FILE = `${TOKEN_DIR}/token`;
const AGENTS = new Set(["ephemera-init", "ephemera-sidecar"]);

/** A container's requests and limits, as Kubernetes quantities. */
export interface Resources {
  requests?: Record<string, string>;
  limits?: Record<string, string>;
}
/** The agents fetch, write and store files: a Node process each, small and short. */
export const DEFAULT_AGENT_RESOURCES: Resources = {
  requests: { cpu: "50m", memory: "64Mi" }, limits: { cpu: "500m", memory: "256Mi" },
};
/** A provisioning script (a client, apt-get, a migration): modest by default, the overlay asks for more. */
export const DEFAULT_MAIN_RESOURCES: Resources = {
  requests: { cpu: "100m", memory: "128Mi" }, limits: { cpu: "1", memory: "1Gi" },
};
/** Restricted (Pod Security Standards): the agents need nothing more. */
const AGENT_SECURITY = {
  runAsNonRoot: true, runAsUser: AGENT_UID, runAsGroup: AGENT_UID, allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] },
};
/** Baseline and no escalation: the plugin's image may need root and the runtime's capabilities (apt-get install). */
const MAIN_SECURITY = { allowPrivilegeEscalation: false };

export interface PodRequest {
  /** Its input_paths and output_paths say which directories the containers share. */
  dispatch: pb.StepDispatch;
  prefix: string;
  agentImage: string;
  /** host:port of the IO context, as pods reach it. */
  iocontext: string;
  /** Namespace when the plugin's runner names none. */
  defaultNamespace: string;
  /** The script's default environment (SIGNADOT_*, EPHEMERA_*): main's, under the overlay's and the inputs. */
  env?: Record<string, string>;
  /** Requests and limits by default (the overlay's win): DEFAULT_MAIN_RESOURCES and DEFAULT_AGENT_RESOURCES if not given. */
  resources?: { main?: Resources; agents?: Resources };
}

/** Pure: a DNS label (≤ 63 characters) for the run's pod, the same for the same run id, distinct for distinct ones. */
export function podName(runId: string): string {
  const hash = createHash("sha256").update(runId).digest("hex").slice(0, 10);
  const slug = runId.toLowerCase().replace(/[^a-z0-9-]+/g, "-").replace(/-+/g, "-").replace(/^-|-$/g, "");
  return `eph-${slug.slice(0, 63 - 4 - 1 - hash.length).replace(/-$/, "")}-${hash}`;
}

const LABEL_VALUE_MAX = 63;
const unpadded = (v: string) => v.replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, "");

/**
 * Pure: a valid label value (≤ 63 of [A-Za-z0-9._-], alphanumeric at both ends), or empty.
 * A value too long is cut and ends with a short hash of the whole value, so that two values
 * sharing their first 63 characters (two prefixes selected by a watch) stay apart; one that
 * fits is as it always was (pods already labelled keep matching).
 */
export function labelValue(v: string): string {
  const safe = v.replace(/[^A-Za-z0-9._-]+/g, "-");
  if (safe.length <= LABEL_VALUE_MAX) return unpadded(safe);
  const hash = shortHash(v);
  const cut = unpadded(safe.slice(0, LABEL_VALUE_MAX - 1 - hash.length));
  return cut ? `${cut}-${hash}` : hash;
}

/** Pure: the directories that get a shared emptyDir (those of declared input and output paths). */
export function sharedDirs(d: Pick<pb.StepDispatch, "inputPaths" | "outputPaths">): string[] {
  const paths = [...d.inputPaths, ...d.outputPaths].filter(Boolean).map((p) => posix.dirname(posix.resolve(STEP_HOME, p)));
  return [...new Set(paths)].sort();
}

/** Pure: the labels of the run's pod and of its token Secret. */
function podLabels(r: PodRequest): Record<string, string> {
  const d = r.dispatch;
  return {
    [`${LABEL}/prefix`]: labelValue(r.prefix),
    [`${LABEL}/sandbox`]: labelValue(d.sandbox),
    [`${LABEL}/resource`]: labelValue(d.resource),
    [`${LABEL}/phase`]: labelValue(d.phase),
    [`${LABEL}/step`]: labelValue(d.step),
    [`${LABEL}/attempt`]: String(d.attempt),
  };
}

/**
 * Pure: the Secret holding the run's capability token, named after its pod and labelled
 * as it is: the agents read it from a file, so it is in no container's environment (which
 * `kubectl get pod -o yaml` and the kubelet's logs would show).
 */
export function buildTokenSecret(r: PodRequest & { token: string }): Json {
  const d = r.dispatch;
  return {
    apiVersion: "v1", kind: "Secret", type: "Opaque",
    metadata: {
      name: podName(d.runId), namespace: d.runner?.namespace || r.defaultNamespace, labels: podLabels(r),
      annotations: { [RUN_ID_ANNOTATION]: d.runId },
    },
    data: { token: Buffer.from(r.token).toString("base64") },
  };
}

/** Pure: the pod for one step attempt, the plugin's overlay merged in. */
export function buildPod(r: PodRequest): Json {
  const d = r.dispatch;
  const name = podName(d.runId);
  const namespace = d.runner?.namespace || r.defaultNamespace;
  const labels = podLabels(r);
  const dirs = sharedDirs(d);
  const mounts = [{ name: "ephemera-agent", mountPath: AGENT_DIR }, ...dirs.map((dir, i) => ({ name: `ephemera-path-${i}`, mountPath: dir }))];
  const tokenMount = { name: TOKEN_VOLUME, mountPath: TOKEN_DIR, readOnly: true };
  const agentEnv = [
    { name: "EPHEMERA_RUN_ID", value: d.runId },
    { name: "EPHEMERA_TOKEN_FILE", value: TOKEN_FILE },
    { name: "EPHEMERA_IOCONTEXT", value: r.iocontext },
    { name: "EPHEMERA_AGENT_DIR", value: AGENT_DIR },
    { name: "EPHEMERA_TERMINATION_MESSAGE_PATH", value: TERMINATION_MESSAGE_PATH },
  ];
  // The sidecar gives up on main after 6 h by default: a step may run longer (up to its timeout's 365 days).
  const sidecarEnv = d.timeoutMs > 0
    ? [...agentEnv, { name: "EPHEMERA_WAIT_TIMEOUT_MS", value: String(d.timeoutMs + SIDECAR_WAIT_MARGIN_MS) }]
    : agentEnv;
  const agentResources = (r.resources?.agents ?? DEFAULT_AGENT_RESOURCES) as Json;
  const agent = (container: string, command: string, env = agentEnv) => ({
    name: container, image: r.agentImage, command: ["node", AGENT_PROGRAM, command], env, volumeMounts: [...mounts, tokenMount],
    terminationMessagePath: TERMINATION_MESSAGE_PATH, terminationMessagePolicy: "File",
    securityContext: structuredClone(AGENT_SECURITY), resources: agentResources,
  });
  const tokenVolume = { name: TOKEN_VOLUME, secret: { secretName: name, defaultMode: 0o444 } };
  const base: Json = {
    metadata: { labels, annotations: { [RUN_ID_ANNOTATION]: d.runId } },
    spec: {
      restartPolicy: "Never",
      ...(d.timeoutMs > 0 ? { activeDeadlineSeconds: Math.ceil(d.timeoutMs / 1000) + START_GRACE_S + OUTPUTS_STORE_GRACE_S } : {}),
      // The step talks to the IO context with its token, never to the API server.
      automountServiceAccountToken: false,
      securityContext: { seccompProfile: { type: "RuntimeDefault" } },
      initContainers: [agent("ephemera-init", "init")],
      containers: [
        {
          name: "main", image: d.runner?.image ?? "", command: [`${AGENT_DIR}/entrypoint`], volumeMounts: mounts,
          ...(r.env ? { env: Object.entries(r.env).map(([name, value]) => ({ name, value })) } : {}),
          securityContext: { ...MAIN_SECURITY }, resources: (r.resources?.main ?? DEFAULT_MAIN_RESOURCES) as Json,
        },
        agent("ephemera-sidecar", "sidecar", sidecarEnv),
      ],
      volumes: [
        { name: "ephemera-agent", emptyDir: {} }, ...dirs.map((_, i) => ({ name: `ephemera-path-${i}`, emptyDir: {} })), tokenVolume,
      ],
    },
  };
  const overlay = overlayOf(d.runner?.podTemplateOverlay ?? "");
  const merged = strategicMerge(base, overlay) as { metadata?: Record<string, Json>; spec: Record<string, Json> };
  // What the driver relies on, whatever the overlay said.
  const spec = merged.spec;
  spec["restartPolicy"] = "Never";
  // A service account the plugin names is there for main to use: its token is mounted as the cluster's defaults say.
  const overlaySpec = ((overlay as Record<string, Json>)["spec"] ?? {}) as Record<string, Json>;
  const namesAccount = Boolean(overlaySpec["serviceAccountName"] || overlaySpec["serviceAccount"]);
  if (namesAccount && overlaySpec["automountServiceAccountToken"] === undefined) delete spec["automountServiceAccountToken"];
  const volumes = (spec["volumes"] ?? []) as Array<Record<string, Json>>;
  spec["volumes"] = [...volumes.filter((v) => v["name"] !== TOKEN_VOLUME), tokenVolume];
  for (const list of ["initContainers", "containers"] as const) {
    for (const c of (spec[list] as Array<Record<string, Json>>)) {
      // The token reaches the agents, and no other container.
      const others = ((c["volumeMounts"] ?? []) as Array<Record<string, Json>>).filter((m) => m["name"] !== TOKEN_VOLUME);
      if (AGENTS.has(String(c["name"]))) {
        c["command"] = ["node", AGENT_PROGRAM, c["name"] === "ephemera-init" ? "init" : "sidecar"];
        c["terminationMessagePath"] = TERMINATION_MESSAGE_PATH;
        c["securityContext"] = structuredClone(AGENT_SECURITY);
        c["volumeMounts"] = [...others, { ...tokenMount }];
      } else if (c["volumeMounts"]) {
        c["volumeMounts"] = others;
      }
      if (c["name"] === "main") c["command"] = [`${AGENT_DIR}/entrypoint`];
    }
  }
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      ...(merged.metadata ?? {}), name, namespace,
      labels: { ...((merged.metadata?.["labels"] as Record<string, Json>) ?? {}), ...labels },
      annotations: { ...((merged.metadata?.["annotations"] as Record<string, Json>) ?? {}), [RUN_ID_ANNOTATION]: d.runId },
    },
    spec,
  };
}

/** The overlay as a pod template (`metadata`, `spec`); a clear error for anything else. */
function overlayOf(text: string): Json {
  if (!text.trim()) return {};
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (err) {
    throw invalid(`not YAML: ${(err as Error).message.split("\n")[0]}`);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== "object" || Array.isArray(doc)) throw invalid("must be a pod template: a map with metadata and/or spec");
  const extra = Object.keys(doc).filter((k) => k !== "metadata" && k !== "spec");
  if (extra.length) throw invalid(`a pod template has only metadata and spec, not ${extra.join(", ")}`);
  return doc as Json;
}

const invalid = (description: string) =>
  new ValidationError([{ field: "runner.podTemplateOverlay", rule: "pod-template", description }], "invalid pod template overlay");
