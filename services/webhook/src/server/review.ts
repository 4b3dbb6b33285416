// AdmissionReview v1 in, AdmissionReview v1 out: the request read and checked, the pod's
// patch answered base64-encoded with the request's uid. Pure.
import { decide } from "../inject/decide.js";
import { injectRouter, type InjectOptions } from "../inject/inject.js";
import type { Pod } from "../inject/pod.js";

export const ADMISSION_API_VERSION = "admission.k8s.io/v1";

/** A body that is no AdmissionReview v1: answered 400, naming the field and the rule. */
export class MalformedReviewError extends Error {
  override readonly name = "MalformedReviewError";
  constructor(readonly field: string, readonly rule: string) {
    super(`malformed AdmissionReview: ${field}: ${rule}`);
  }
}

export const isMalformedReviewError = (err: unknown): err is MalformedReviewError => err instanceof MalformedReviewError;

type Rec = Record<string, unknown>;
const isRecord = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);

export interface AdmissionResponse {
  uid: string;
  allowed: true;
  patchType?: "JSONPatch";
  patch?: string;
  warnings?: string[];
}

export interface ReviewAnswer {
  review: { apiVersion: string; kind: "AdmissionReview"; response: AdmissionResponse };
  /** What was done, for the log: `injected`, or why not. */
  outcome: "injected" | "not-asked" | "injected-already" | "no-ports" | "no-workload" | "not-a-pod-create";
  pod?: { namespace: string; name: string; workload?: string };
}

function read(body: unknown): { uid: string; request: Rec } {
  if (!isRecord(body)) throw new MalformedReviewError("(body)", "must be a JSON object");
  if (body["apiVersion"] !== ADMISSION_API_VERSION) {
    throw new MalformedReviewError("apiVersion", `must be ${ADMISSION_API_VERSION} (admissionReviewVersions: [v1]), not ${JSON.stringify(body["apiVersion"] ?? null)}`);
  }
  if (body["kind"] !== "AdmissionReview") throw new MalformedReviewError("kind", `must be AdmissionReview, not ${JSON.stringify(body["kind"] ?? null)}`);
  const request = body["request"];
  if (!isRecord(request)) throw new MalformedReviewError("request", "required, an object");
  const uid = request["uid"];
  if (typeof uid !== "string" || !uid) throw new MalformedReviewError("request.uid", "required, a non-empty string");
  return { uid, request };
}

const isPodCreate = (request: Rec) => {
  const kind = isRecord(request["kind"]) ? request["kind"] : {};
  return (kind["group"] ?? "") === "" && kind["kind"] === "Pod" && request["operation"] === "CREATE" && !request["subResource"];
};

/** The answer to one review body (already parsed from JSON); a pod create gets the router's patch when it asks for it. */
export function answerReview(body: unknown, options: InjectOptions): ReviewAnswer {
  const { uid, request } = read(body);
  const answer = (response: Omit<AdmissionResponse, "uid" | "allowed">, outcome: ReviewAnswer["outcome"], pod?: ReviewAnswer["pod"]): ReviewAnswer => ({
    review: { apiVersion: ADMISSION_API_VERSION, kind: "AdmissionReview", response: { uid, allowed: true, ...response } },
    outcome, ...(pod ? { pod } : {}),
  });
  if (!isPodCreate(request)) return answer({}, "not-a-pod-create");
  const object = request["object"];
  if (!isRecord(object)) throw new MalformedReviewError("request.object", "required for a pod CREATE, the pod");
  const pod = object as Pod;
  const namespace = pod.metadata?.namespace || (typeof request["namespace"] === "string" && request["namespace"]) || "default";
  const name = pod.metadata?.name || (typeof request["name"] === "string" && request["name"]) || `${pod.metadata?.generateName ?? ""}*`;
  const decision = decide(pod, namespace);
  if (!decision.inject) {
    if ("warning" in decision) return answer({ warnings: [decision.warning] }, decision.reason, { namespace, name });
    return answer({}, decision.reason === "injected" ? "injected-already" : "not-asked", { namespace, name });
  }
  const patch = injectRouter(pod, { ...options, namespace });
  return answer({ patchType: "JSONPatch", patch: Buffer.from(JSON.stringify(patch)).toString("base64") }, "injected", { namespace, name, workload: decision.workload });
}
