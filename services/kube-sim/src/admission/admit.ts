// Mutating admission on create: before an object is stored, every matching webhook of every
// MutatingWebhookConfiguration (by configuration name, then in order) gets an AdmissionReview
// and its JSONPatch is applied, with the patch code PATCH requests use. A call that fails
// follows the webhook's failurePolicy: Ignore logs a warning and goes on with the object as
// it stands (a webhook outage never blocks a pod); Fail refuses the create with the error,
// as the real API server does. No reinvocation.
import { randomUUID } from "node:crypto";
import { findType, typeOf, type ResourceType } from "../resources.js";
import { ApiError } from "../status.js";
import type { Obj, Store } from "../store.js";
import { jsonPatch, type Json } from "../patch.js";
import { callWebhook, CallError, type AdmissionResponse } from "./call.js";
import type { WebhookSpec } from "./configuration.js";
import { webhookMatches, type AdmissionTarget } from "./match.js";

export interface Admitted {
  object: Obj;
  /** The webhooks' warnings, for the client (`Warning` headers). */
  warnings: string[];
}

const CONFIGURATIONS = () => findType("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations")!;

/** `admission webhook "x" denied the request: why`, with the webhook's code (400 at least), as ToStatusErr makes it. */
function denied(webhook: string, status: AdmissionResponse["status"]): ApiError {
  const code = Math.max(status?.code ?? 400, 400);
  const by = `admission webhook "${webhook}" denied the request`;
  const message = status?.message ? `${by}: ${status.message}` : status?.reason ? `${by}: ${status.reason}` : `${by} without explanation`;
  return new ApiError(code, status?.reason ?? "", message);
}

const internal = (message: string) => new ApiError(500, "InternalError", `Internal error occurred: ${message}`);

export class Admission {
  constructor(private readonly store: Store, private readonly warn: (line: string) => void) {}

  private webhooks(): WebhookSpec[] {
    const configurations = this.store.list(CONFIGURATIONS()).sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    return configurations.flatMap((c) => (c["webhooks"] ?? []) as WebhookSpec[]);
  }

  private target(type: ResourceType, ns: string | undefined, object: Obj): AdmissionTarget | undefined {
    const labels = object.metadata?.labels ?? {};
    if (!type.namespaced) {
      return { operation: "CREATE", type, labels, namespaceLabels: type.kind === "Namespace" && type.group === "" ? labels : undefined };
    }
    const namespace = this.store.get(typeOf("namespaces"), undefined, ns ?? "");
    // No such namespace: the create is refused further on, as namespace lifecycle admission would first.
    if (!namespace) return undefined;
    return { operation: "CREATE", type, labels, namespaceLabels: namespace.metadata.labels ?? {} };
  }

  /** The object as the mutating webhooks leave it; `ns` is the namespace it is created in. */
  async admitCreate(type: ResourceType, ns: string | undefined, object: Obj): Promise<Admitted> {
    const webhooks = this.webhooks();
    if (!webhooks.length || !object || typeof object !== "object" || Array.isArray(object)) return { object, warnings: [] };
    const target = this.target(type, ns, object);
    if (!target) return { object, warnings: [] };
    let current = object;
    const warnings: string[] = [];
    for (const webhook of webhooks.filter((w) => webhookMatches(w, target))) {
      const review = this.review(type, ns, current);
      let response: AdmissionResponse;
      try {
        response = await callWebhook(webhook, review);
      } catch (err) {
        if (!(err instanceof CallError)) throw err;
        if (webhook.failurePolicy === "Ignore") {
          this.warn(`Failed calling webhook, failing open ${webhook.name}: ${err.message}`);
          continue;
        }
        throw internal(err.message);
      }
      warnings.push(...(response.warnings ?? []));
      if (!response.allowed) throw denied(webhook.name, response.status);
      if (!response.patch) continue;
      if (response.patchType !== "JSONPatch") throw internal(`unsupported patch type "${response.patchType ?? ""}" from webhook "${webhook.name}"`);
      let ops: Json;
      try {
        ops = JSON.parse(Buffer.from(response.patch, "base64").toString("utf8")) as Json;
        current = jsonPatch(current as unknown as Json, ops) as unknown as Obj;
      } catch (err) {
        throw internal(`JSON patch from webhook "${webhook.name}" could not be applied: ${(err as Error).message}`);
      }
    }
    return { object: current, warnings };
  }

  private review(type: ResourceType, ns: string | undefined, object: Obj) {
    const gvk = { group: type.group, version: type.version, kind: type.kind };
    const gvr = { group: type.group, version: type.version, resource: type.plural };
    const name = object.metadata?.name;
    return {
      apiVersion: "admission.k8s.io/v1",
      kind: "AdmissionReview",
      request: {
        uid: randomUUID(), kind: gvk, resource: gvr, requestKind: gvk, requestResource: gvr,
        ...(name ? { name } : {}), ...(type.namespaced && ns ? { namespace: ns } : {}),
        operation: "CREATE",
        userInfo: { username: "kube-sim", groups: ["system:masters", "system:authenticated"] },
        object, oldObject: null, dryRun: false,
        options: { apiVersion: "meta.k8s.io/v1", kind: "CreateOptions" },
      },
    };
  }
}
