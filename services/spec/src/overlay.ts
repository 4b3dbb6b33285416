// runner.podTemplateOverlay: a YAML pod template merged into each runner pod. Checked here
// for what would break the runner (restart policy, image, namespace, the agents' containers)
// and for misspelt fields, which Kubernetes would otherwise drop or reject at run time.
import { parseDocument } from "yaml";
import { MAIN_CONTAINER, RESERVED_CONTAINERS } from "./names.js";
import type { Rule } from "./violations.js";

export interface OverlayProblem {
  rule: Rule;
  message: string;
}

const METADATA_FIELDS = ["labels", "annotations", "namespace"];

// PodSpec fields (Kubernetes 1.33); extend when Kubernetes adds some.
const POD_SPEC_FIELDS = [
  "activeDeadlineSeconds", "affinity", "automountServiceAccountToken", "containers", "dnsConfig", "dnsPolicy",
  "enableServiceLinks", "ephemeralContainers", "hostAliases", "hostIPC", "hostNetwork", "hostPID", "hostUsers",
  "hostname", "imagePullSecrets", "initContainers", "nodeName", "nodeSelector", "os", "overhead", "preemptionPolicy",
  "priority", "priorityClassName", "readinessGates", "resourceClaims", "resources", "restartPolicy", "runtimeClassName",
  "schedulerName", "schedulingGates", "securityContext", "serviceAccount", "serviceAccountName", "setHostnameAsFQDN",
  "shareProcessNamespace", "subdomain", "terminationGracePeriodSeconds", "tolerations", "topologySpreadConstraints",
  "volumes",
];

const CONTAINER_FIELDS = [
  "args", "command", "env", "envFrom", "image", "imagePullPolicy", "lifecycle", "livenessProbe", "name", "ports",
  "readinessProbe", "resizePolicy", "resources", "restartPolicy", "securityContext", "startupProbe", "stdin",
  "stdinOnce", "terminationMessagePath", "terminationMessagePolicy", "tty", "volumeDevices", "volumeMounts", "workingDir",
];

const CONTAINER_LISTS = ["containers", "initContainers", "ephemeralContainers"];

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

export function checkOverlay(overlay: string, runner: { image?: string; namespace?: string }): OverlayProblem[] {
  const doc = parseDocument(overlay, { uniqueKeys: true });
  if (doc.errors.length > 0) {
    return [{ rule: "overlay-yaml", message: `podTemplateOverlay is not valid YAML: ${firstLine(doc.errors[0]?.message)}` }];
  }
  let tpl: unknown;
  try {
    tpl = doc.toJS();
  } catch (err) {
    return [{ rule: "overlay-yaml", message: `podTemplateOverlay is not valid YAML: ${firstLine(err instanceof Error ? err.message : String(err))}` }];
  }
  if (tpl === null || tpl === undefined) return [];
  const problems: OverlayProblem[] = [];
  const shape = (message: string) => problems.push({ rule: "overlay-shape", message: `podTemplateOverlay is not a pod template: ${message}` });
  if (!isObj(tpl)) {
    shape("expected a mapping with metadata and/or spec");
    return problems;
  }
  for (const key of Object.keys(tpl)) {
    if (key !== "metadata" && key !== "spec") shape(`unknown field "${key}" (a pod template has metadata and spec)`);
  }
  if (tpl.metadata !== undefined) checkMetadata(tpl.metadata, runner, problems, shape);
  if (tpl.spec !== undefined) checkSpec(tpl.spec, runner, problems, shape);
  return problems;
}

function checkMetadata(meta: unknown, runner: { namespace?: string }, problems: OverlayProblem[], shape: (m: string) => void): void {
  if (!isObj(meta)) return shape("metadata must be a mapping");
  for (const key of Object.keys(meta)) {
    if (!METADATA_FIELDS.includes(key)) shape(`metadata.${key} cannot be set (allowed: ${METADATA_FIELDS.join(", ")})`);
  }
  for (const key of ["labels", "annotations"]) {
    const map = meta[key];
    if (map === undefined) continue;
    if (!isObj(map) || Object.values(map).some((v) => typeof v !== "string")) shape(`metadata.${key} must map names to strings`);
  }
  if (meta.namespace !== undefined && meta.namespace !== (runner.namespace ?? "")) {
    problems.push({
      rule: "overlay-namespace",
      message: runner.namespace
        ? `podTemplateOverlay metadata.namespace "${String(meta.namespace)}" differs from runner.namespace "${runner.namespace}"`
        : `podTemplateOverlay sets metadata.namespace "${String(meta.namespace)}": set runner.namespace instead`,
    });
  }
}

function checkSpec(spec: unknown, runner: { image?: string }, problems: OverlayProblem[], shape: (m: string) => void): void {
  if (!isObj(spec)) return shape("spec must be a mapping");
  for (const key of Object.keys(spec)) {
    if (!POD_SPEC_FIELDS.includes(key)) shape(`spec.${key} is not a pod spec field`);
  }
  if (spec.restartPolicy !== undefined && spec.restartPolicy !== "Never") {
    problems.push({ rule: "overlay-restart-policy", message: `podTemplateOverlay spec.restartPolicy must be Never (a step runs once per pod), not "${String(spec.restartPolicy)}"` });
  }
  if (spec.volumes !== undefined && (!Array.isArray(spec.volumes) || spec.volumes.some((v) => !isObj(v) || typeof v.name !== "string"))) {
    shape("spec.volumes must be a list of volumes, each with a name");
  }
  for (const list of CONTAINER_LISTS) {
    const containers = spec[list];
    if (containers === undefined) continue;
    if (!Array.isArray(containers)) {
      shape(`spec.${list} must be a list`);
      continue;
    }
    containers.forEach((c: unknown, i) => checkContainer(c, `spec.${list}[${i}]`, list === "containers", runner, problems, shape));
  }
}

function checkContainer(
  c: unknown, at: string, isMainList: boolean, runner: { image?: string }, problems: OverlayProblem[], shape: (m: string) => void,
): void {
  if (!isObj(c)) return shape(`${at} must be a mapping`);
  if (typeof c.name !== "string" || c.name === "") return shape(`${at} needs a name (containers are merged by name)`);
  for (const key of Object.keys(c)) {
    if (!CONTAINER_FIELDS.includes(key)) shape(`${at}.${key} is not a container field`);
  }
  if (c.env !== undefined && (!Array.isArray(c.env) || c.env.some((e) => !isObj(e) || typeof e.name !== "string"))) {
    shape(`${at}.env must be a list of env vars, each with a name`);
  }
  if ((RESERVED_CONTAINERS as readonly string[]).includes(c.name)) {
    problems.push({ rule: "overlay-reserved-container", message: `podTemplateOverlay ${at} uses the container name "${c.name}", reserved for ephemera's agents` });
  }
  if (isMainList && c.name === MAIN_CONTAINER && c.image !== undefined && runner.image && c.image !== runner.image) {
    problems.push({ rule: "overlay-image", message: `podTemplateOverlay ${at}.image "${String(c.image)}" differs from runner.image "${runner.image}" (set the image in runner.image)` });
  }
}

function firstLine(s: string | undefined): string {
  return (s ?? "").split("\n")[0] ?? "";
}
