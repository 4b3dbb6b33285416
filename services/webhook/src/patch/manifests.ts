// The webhook's mutation for clusters that allow no webhooks: the pod templates of the
// manifests given (Deployments, StatefulSets, Rollouts, Jobs, CronJobs, pods, Lists) get the
// router as the webhook would give it to their pods, and the result is applied with kubectl.
import jsonpatch, { type Operation } from "fast-json-patch";
import { parseAllDocuments, stringify } from "yaml";
import { decide } from "../inject/decide.js";
import { injectRouter, type InjectOptions } from "../inject/inject.js";
import { INJECT_ANNOTATION, type Pod } from "../inject/pod.js";

type Rec = Record<string, unknown>;
const isRecord = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);

export interface PatchOptions extends InjectOptions {
  /** Inject every pod template, annotated or not (the annotation is then added). */
  all?: boolean;
}

export interface PatchResult {
  /** The manifests, injected, as YAML documents. */
  yaml: string;
  /** One line per pod template: injected, or why not. */
  notes: string[];
}

/** A manifest that cannot be read: the document and what is wrong. */
export class ManifestError extends Error {
  override readonly name = "ManifestError";
}

/** Where each kind keeps its pod template. */
function templateOf(obj: Rec): Pod | undefined {
  const spec = isRecord(obj["spec"]) ? obj["spec"] : undefined;
  if (obj["kind"] === "Pod") return obj as Pod;
  if (obj["kind"] === "CronJob") {
    const job = isRecord(spec?.["jobTemplate"]) ? (spec!["jobTemplate"] as Rec)["spec"] : undefined;
    return isRecord(job) && isRecord(job["template"]) ? (job["template"] as Pod) : undefined;
  }
  return isRecord(spec?.["template"]) ? (spec!["template"] as Pod) : undefined;
}

function inject(obj: Rec, options: PatchOptions, notes: string[]): void {
  if (obj["kind"] === "List" && Array.isArray(obj["items"])) {
    for (const item of obj["items"]) if (isRecord(item)) inject(item, options, notes);
    return;
  }
  const template = templateOf(obj);
  if (!template) return;
  const meta = (isRecord(obj["metadata"]) ? obj["metadata"] : {}) as { name?: string; namespace?: string };
  const namespace = meta.namespace || options.namespace || "default";
  const label = `${String(obj["kind"])} ${namespace}/${meta.name ?? "(unnamed)"}`;
  if (options.all) {
    template.metadata ??= {};
    template.metadata.annotations = { ...template.metadata.annotations, [INJECT_ANNOTATION]: "true" };
  }
  // A template's pods are owned by its workload, named after it: the router routes for the workload itself.
  const pod: Pod = obj["kind"] === "Pod" ? template : {
    ...template,
    metadata: {
      generateName: `${meta.name ?? ""}-`, ...template.metadata, namespace,
      ownerReferences: [{ kind: String(obj["kind"]), name: meta.name ?? "", controller: true }],
    },
  };
  const decision = decide(pod, namespace);
  if (!decision.inject) {
    const why = "warning" in decision ? decision.warning
      : decision.reason === "not-asked" ? `not annotated ${INJECT_ANNOTATION}: "true" (--all injects it anyway)` : "has the router already";
    notes.push(`${label}: left as it is: ${why}`);
    return;
  }
  const ops = injectRouter(pod, { ...options, namespace });
  jsonpatch.applyPatch(template, ops as Operation[], true, true);
  notes.push(`${label}: injected (workload ${decision.workload}, ports ${decision.ports.map((p) => `${p.app}→${p.listen}`).join(", ")})`);
}

/** The manifests of `text` (YAML or JSON, one or more documents) with their pod templates injected. */
export function patchManifests(text: string, options: PatchOptions): PatchResult {
  const notes: string[] = [];
  const docs = parseAllDocuments(text);
  const out: string[] = [];
  docs.forEach((doc, i) => {
    if (doc.errors.length) throw new ManifestError(`document ${i + 1}: not YAML: ${doc.errors[0]!.message}`);
    const obj = doc.toJSON() as unknown;
    if (obj === null || obj === undefined) return;
    if (!isRecord(obj)) throw new ManifestError(`document ${i + 1}: a manifest must be a mapping with apiVersion and kind`);
    inject(obj, options, notes);
    out.push(stringify(obj, { lineWidth: 0 }));
  });
  return { yaml: out.join("---\n"), notes };
}
