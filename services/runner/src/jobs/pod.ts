// The pod of a job runner group (docs/jobs.md, "Pods"): the group's pod_template with the
// group's image as its main container (the template's first container, or one named
// `main`), whose command becomes the job agent, so each job runs in that container's
// environment. The agent and the Node that runs it are copied into an emptyDir by the init
// container `ephemera-job-agent-init` (the agent image). The pod's capability token is in a
// Secret named after the pod, read by the agent from its environment (EPHEMERA_POD_TOKEN),
// which the agent keeps from the jobs it runs.
import { createHash, randomBytes } from "node:crypto";
import { ValidationError } from "@ephemera/kit";
import type * as pb from "@ephemera/proto";
import { AGENT_PROGRAM, labelValue } from "../driver/kube/pod.js";
import { strategicMerge, type Json } from "../driver/kube/merge.js";

const LABEL = "ephemera.dev";
export const GROUP_LABEL = `${LABEL}/job-group`;
/** A digest of the group's spec: a pod of an earlier spec is replaced. */
export const SPEC_LABEL = `${LABEL}/job-group-spec`;
export const PREFIX_LABEL = `${LABEL}/prefix`;
/** Where the init container puts the agent and its Node in every container that mounts it. */
export const JOB_AGENT_DIR = "/ephemera-job";
const AGENT_VOLUME = "ephemera-job-agent";
/** The init container copies the agent image's /agent and its node binary (plain Node: the agent image may have no shell). */
const COPY_AGENT = `const fs=require("fs");fs.cpSync(${JSON.stringify(AGENT_PROGRAM.slice(0, AGENT_PROGRAM.lastIndexOf("/")))},${JSON.stringify(JOB_AGENT_DIR)},{recursive:true});`
  + `fs.copyFileSync(process.execPath,${JSON.stringify(`${JOB_AGENT_DIR}/node`)});fs.chmodSync(${JSON.stringify(`${JOB_AGENT_DIR}/node`)},0o755);`;

export interface GroupPodRequest {
  group: string;
  spec: pb.JobRunnerGroupSpec;
  pod: string;
  prefix: string;
  agentImage: string;
  /** host:port of the JobAgent service as pods reach it. */
  podJobs: string;
}

/** Pure: a digest of what a pod is built from (a changed image, template or namespace gives another). */
export function specDigest(spec: pb.JobRunnerGroupSpec): string {
  const { image, podTemplate, namespace, labels } = spec;
  return createHash("sha256").update(JSON.stringify({ image, podTemplate, namespace, labels: Object.entries(labels).sort() })).digest("hex").slice(0, 16);
}

/** A new pod's name: the group's, cut to fit, and a random suffix (a DNS label). */
export function groupPodName(group: string): string {
  const slug = group.toLowerCase().replace(/[^a-z0-9-]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 50).replace(/-+$/, "");
  return `${slug || "group"}-${randomBytes(4).toString("hex")}`;
}

/** Pure: the labels every pod (and token Secret) of the group carries; a watch selects by the first two. */
export function groupLabels(prefix: string, group: string): Record<string, string> {
  return { [PREFIX_LABEL]: labelValue(prefix), [GROUP_LABEL]: labelValue(group) };
}

export function buildGroupPod(r: GroupPodRequest): Json {
  const template = templateOf(r.spec.podTemplate);
  const labels = { ...r.spec.labels, ...groupLabels(r.prefix, r.group), [SPEC_LABEL]: specDigest(r.spec) };
  const base: Json = {
    metadata: { labels },
    spec: { automountServiceAccountToken: false, securityContext: { seccompProfile: { type: "RuntimeDefault" } } },
  };
  const merged = strategicMerge(base, template) as { metadata?: Record<string, Json>; spec: Record<string, Json> };
  const spec = merged.spec;
  const templateSpec = ((template as Record<string, Json>)["spec"] ?? {}) as Record<string, Json>;
  if ((templateSpec["serviceAccountName"] || templateSpec["serviceAccount"]) && templateSpec["automountServiceAccountToken"] === undefined) {
    delete spec["automountServiceAccountToken"];
  }
  const containers = ((spec["containers"] ?? []) as Array<Record<string, Json>>).map((c) => ({ ...c }));
  if (!containers.length) containers.push({ name: "main" });
  const main = containers[0]!;
  const mount = { name: AGENT_VOLUME, mountPath: JOB_AGENT_DIR, readOnly: true };
  const ours = new Set(["EPHEMERA_POD_JOBS", "EPHEMERA_JOB_GROUP", "EPHEMERA_POD_NAME", "EPHEMERA_POD_TOKEN", "EPHEMERA_POD_TOKEN_FILE"]);
  main["image"] = r.spec.image;
  // The job agent is the main container's program; the template's command and args are not run.
  main["command"] = [`${JOB_AGENT_DIR}/node`, `${JOB_AGENT_DIR}/agent.cjs`, "job-agent"];
  delete main["args"];
  main["env"] = [
    ...((main["env"] ?? []) as Array<Record<string, Json>>).filter((e) => !ours.has(String(e["name"]))),
    { name: "EPHEMERA_POD_JOBS", value: r.podJobs },
    { name: "EPHEMERA_JOB_GROUP", value: r.group },
    { name: "EPHEMERA_POD_NAME", value: r.pod },
    { name: "EPHEMERA_POD_TOKEN", valueFrom: { secretKeyRef: { name: r.pod, key: "token" } } },
  ];
  main["volumeMounts"] = [...((main["volumeMounts"] ?? []) as Array<Record<string, Json>>).filter((m) => m["name"] !== AGENT_VOLUME), mount];
  spec["containers"] = containers;
  const inits = ((spec["initContainers"] ?? []) as Array<Record<string, Json>>).filter((c) => c["name"] !== "ephemera-job-agent-init");
  spec["initContainers"] = [
    {
      name: "ephemera-job-agent-init", image: r.agentImage, command: ["node", "-e", COPY_AGENT],
      volumeMounts: [{ name: AGENT_VOLUME, mountPath: JOB_AGENT_DIR }],
      securityContext: { runAsNonRoot: true, allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
      resources: { requests: { cpu: "50m", memory: "64Mi" }, limits: { cpu: "500m", memory: "256Mi" } },
    },
    ...inits,
  ];
  spec["volumes"] = [...((spec["volumes"] ?? []) as Array<Record<string, Json>>).filter((v) => v["name"] !== AGENT_VOLUME), { name: AGENT_VOLUME, emptyDir: {} }];
  // The runner keeps the count: a pod that ends is replaced by another, its agent restarted in place meanwhile.
  spec["restartPolicy"] = "Always";
  return {
    apiVersion: "v1", kind: "Pod",
    metadata: {
      ...(merged.metadata ?? {}), name: r.pod, namespace: r.spec.namespace,
      labels: { ...((merged.metadata?.["labels"] as Record<string, Json>) ?? {}), ...labels },
    },
    spec,
  };
}

/** Pure: the Secret holding the pod's token, named after it, owned by it (it goes with the pod). */
export function buildTokenSecret(r: GroupPodRequest & { token: string; podUid: string }): Json {
  return {
    apiVersion: "v1", kind: "Secret", type: "Opaque",
    metadata: {
      name: r.pod, namespace: r.spec.namespace, labels: groupLabels(r.prefix, r.group),
      ownerReferences: [{ apiVersion: "v1", kind: "Pod", name: r.pod, uid: r.podUid }],
    },
    data: { token: Buffer.from(r.token).toString("base64") },
  };
}

/** The group's pod_template (JSON PodTemplateSpec text) as an object; a clear error for anything else. */
function templateOf(text: string): Json {
  if (!text.trim()) return {};
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw invalid(`not JSON: ${(err as Error).message}`);
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) throw invalid("must be a pod template: an object with metadata and/or spec");
  const extra = Object.keys(doc).filter((k) => k !== "metadata" && k !== "spec");
  if (extra.length) throw invalid(`a pod template has only metadata and spec, not ${extra.join(", ")}`);
  return doc as Json;
}

const invalid = (description: string) =>
  new ValidationError([{ field: "spec.podTemplate", rule: "pod-template", description }], "invalid pod template");
