// The runner pod of one step attempt (docs/agent.md has the contract): init container
// `ephemera-init` (the agent image) fetches the inputs and script and writes the
// entrypoint into the agent directory; `main` runs the plugin's runner image with that
// entrypoint; sidecar `ephemera-sidecar` stores the outputs and writes the report. The
// agent directory and every directory holding a declared input or output path are
// emptyDirs shared by the three. The plugin's podTemplateOverlay is strategic-merged on
// top; what the driver relies on (name, labels, restartPolicy, the agents' commands and
// the entrypoint) is set again after it.
import { createHash } from "node:crypto";
import { posix } from "node:path";
import { parse } from "yaml";
import { ValidationError } from "@ephemera/kit";
import type * as pb from "@ephemera/proto";
import { strategicMerge, type Json } from "./merge.js";

export const AGENT_DIR = "/ephemera";
/** Where the agent image keeps the bundled agent. */
export const AGENT_PROGRAM = "/agent/agent.cjs";
const STEP_HOME = "/tmp";
/** How much longer than the step's timeout the sidecar waits for main's exit code (the pod's deadline comes first). */
const SIDECAR_WAIT_MARGIN_MS = 5 * 60_000;
/** Where the agents write their report's summary, which the pod's status carries to the runner. */
export const TERMINATION_MESSAGE_PATH = "/dev/termination-log";
/** The full run id (labels cannot hold it): how a restarted runner knows whose pod it finds. */
export const RUN_ID_ANNOTATION = "ephemera.dev/run-id";
const LABEL = "ephemera.dev";

export interface PodRequest {
  /** Its input_paths and output_paths say which directories the containers share. */
  dispatch: pb.StepDispatch;
  prefix: string;
  agentImage: string;
  /** host:port of the IO context, as pods reach it. */
  iocontext: string;
  /** The run's capability token: in the agents' environment only, never main's. */
  token: string;
  /** Namespace when the plugin's runner names none. */
  defaultNamespace: string;
  /** The script's default environment (SIGNADOT_*, EPHEMERA_*): main's, under the overlay's and the inputs. */
  env?: Record<string, string>;
}

/** Pure: a DNS label (≤ 63 characters) for the run's pod, the same for the same run id, distinct for distinct ones. */
export function podName(runId: string): string {
  const hash = createHash("sha256").update(runId).digest("hex").slice(0, 10);
  const slug = runId.toLowerCase().replace(/[^a-z0-9-]+/g, "-").replace(/-+/g, "-").replace(/^-|-$/g, "");
  return `eph-${slug.slice(0, 63 - 4 - 1 - hash.length).replace(/-$/, "")}-${hash}`;
}

/** Pure: a valid label value (≤ 63 of [A-Za-z0-9._-], alphanumeric at both ends), or empty. */
export function labelValue(v: string): string {
  return v.replace(/[^A-Za-z0-9._-]+/g, "-").slice(0, 63).replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, "");
}

/** Pure: the directories that get a shared emptyDir (those of declared input and output paths). */
export function sharedDirs(d: Pick<pb.StepDispatch, "inputPaths" | "outputPaths">): string[] {
  const paths = [...d.inputPaths, ...d.outputPaths].filter(Boolean).map((p) => posix.dirname(posix.resolve(STEP_HOME, p)));
  return [...new Set(paths)].sort();
}

/** Pure: the pod for one step attempt, the plugin's overlay merged in. */
export function buildPod(r: PodRequest): Json {
  const d = r.dispatch;
  const name = podName(d.runId);
  const namespace = d.runner?.namespace || r.defaultNamespace;
  const labels: Record<string, string> = {
    [`${LABEL}/prefix`]: labelValue(r.prefix),
    [`${LABEL}/sandbox`]: labelValue(d.sandbox),
    [`${LABEL}/resource`]: labelValue(d.resource),
    [`${LABEL}/phase`]: labelValue(d.phase),
    [`${LABEL}/step`]: labelValue(d.step),
    [`${LABEL}/attempt`]: String(d.attempt),
  };
  const dirs = sharedDirs(d);
  const mounts = [{ name: "ephemera-agent", mountPath: AGENT_DIR }, ...dirs.map((dir, i) => ({ name: `ephemera-path-${i}`, mountPath: dir }))];
  const agentEnv = [
    { name: "EPHEMERA_RUN_ID", value: d.runId },
    { name: "EPHEMERA_TOKEN", value: r.token },
    { name: "EPHEMERA_IOCONTEXT", value: r.iocontext },
    { name: "EPHEMERA_AGENT_DIR", value: AGENT_DIR },
    { name: "EPHEMERA_TERMINATION_MESSAGE_PATH", value: TERMINATION_MESSAGE_PATH },
  ];
  // The sidecar gives up on main after 6 h by default: a step may run longer (up to its timeout's 365 days).
  const sidecarEnv = d.timeoutMs > 0
    ? [...agentEnv, { name: "EPHEMERA_WAIT_TIMEOUT_MS", value: String(d.timeoutMs + SIDECAR_WAIT_MARGIN_MS) }]
    : agentEnv;
  const agent = (container: string, command: string, env = agentEnv) => ({
    name: container, image: r.agentImage, command: ["node", AGENT_PROGRAM, command], env, volumeMounts: mounts,
    terminationMessagePath: TERMINATION_MESSAGE_PATH, terminationMessagePolicy: "File",
  });
  const base: Json = {
    metadata: { labels, annotations: { [RUN_ID_ANNOTATION]: d.runId } },
    spec: {
      restartPolicy: "Never",
      ...(d.timeoutMs > 0 ? { activeDeadlineSeconds: Math.ceil(d.timeoutMs / 1000) } : {}),
      initContainers: [agent("ephemera-init", "init")],
      containers: [
        {
          name: "main", image: d.runner?.image ?? "", command: [`${AGENT_DIR}/entrypoint`], volumeMounts: mounts,
          ...(r.env ? { env: Object.entries(r.env).map(([name, value]) => ({ name, value })) } : {}),
        },
        agent("ephemera-sidecar", "sidecar", sidecarEnv),
      ],
      volumes: [{ name: "ephemera-agent", emptyDir: {} }, ...dirs.map((_, i) => ({ name: `ephemera-path-${i}`, emptyDir: {} }))],
    },
  };
  const merged = strategicMerge(base, overlayOf(d.runner?.podTemplateOverlay ?? "")) as { metadata?: Record<string, Json>; spec: Record<string, Json> };
  // What the driver relies on, whatever the overlay said.
  const spec = merged.spec;
  spec["restartPolicy"] = "Never";
  for (const list of ["initContainers", "containers"] as const) {
    for (const c of (spec[list] as Array<Record<string, Json>>)) {
      if (c["name"] === "ephemera-init" || c["name"] === "ephemera-sidecar") {
        c["command"] = ["node", AGENT_PROGRAM, c["name"] === "ephemera-init" ? "init" : "sidecar"];
        c["terminationMessagePath"] = TERMINATION_MESSAGE_PATH;
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
