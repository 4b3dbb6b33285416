// Create, read, update, patch and delete over the store, with the real server's checks:
// the namespace must exist, names are unique, a stale resourceVersion conflicts, status
// is written only through the status subresource. Pod deletion is handed to the kubelet,
// which ends the containers before the object goes.
import { randomBytes, randomUUID } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import { apiVersionOf, RESOURCE_TYPES, typeOf, type ResourceType } from "../resources.js";
import { alreadyExists, badRequest, conflict, invalid, invalidObject, namespaceNotFound, notFound } from "../status.js";
import type { Obj, Store } from "../store.js";
import { applyPatch, type Json } from "../patch.js";
import { rfc3339 } from "../time.js";
import type { ClusterIPs } from "../network/cluster-ips.js";
import { endpointsDefaults, namespaceDefaults, podDefaults, replicasDefault, secretDefaults, serviceDefaults } from "./defaults.js";
import { validateObject, validateUpdate } from "./validate.js";
import { webhookConfigurationDefaults } from "../admission/configuration.js";

export interface PodTerminator {
  /** Starts the graceful deletion of a pod; answers the pod as it stands after (or as removed). */
  deletePod(pod: Obj, graceSeconds: number | undefined): Obj;
}

/** Kinds whose status is written through `/status` only (a write to the object keeps the stored status). */
const hasStatus = (t: ResourceType) => (t.subresources ?? []).includes("status");
const NO_GENERATION = new Set(["Namespace", "Secret", "ConfigMap", "ServiceAccount", "Event", "Endpoints"]);

export class Crud {
  constructor(private readonly store: Store, private readonly pods: PodTerminator, private readonly clusterIPs: ClusterIPs) {}

  private requireNamespace(type: ResourceType, ns: string | undefined): void {
    if (type.namespaced && ns !== undefined && !this.store.get(typeOf("namespaces"), undefined, ns)) throw namespaceNotFound(ns);
  }

  get(type: ResourceType, ns: string | undefined, name: string): Obj {
    const obj = this.store.get(type, type.namespaced ? ns : undefined, name);
    if (!obj) throw notFound(type, name);
    return obj;
  }

  create(type: ResourceType, ns: string | undefined, body: Obj): Obj {
    if (!body || typeof body !== "object") throw badRequest("the body of the request must be an object");
    const meta = { ...((body.metadata ?? {}) as Record<string, unknown>) };
    if (!meta["name"] && meta["generateName"]) meta["name"] = `${meta["generateName"]}${randomBytes(4).toString("hex").slice(0, 5)}`;
    const name = meta["name"] as string | undefined;
    if (!name) throw invalid(type, "", "metadata.name", "Required value: name or generateName is required");
    if (type.namespaced) {
      if (meta["namespace"] && ns && meta["namespace"] !== ns) throw badRequest("the namespace of the provided object does not match the namespace sent on the request");
      ns = ns ?? (meta["namespace"] as string | undefined) ?? "default";
      this.requireNamespace(type, ns);
    }
    if (this.store.get(type, type.namespaced ? ns : undefined, name)) throw alreadyExists(type, name);
    let obj = {
      ...body,
      apiVersion: apiVersionOf(type),
      kind: type.kind,
      metadata: {
        ...meta,
        name,
        ...(type.namespaced ? { namespace: ns } : { namespace: undefined }),
        uid: randomUUID(),
        creationTimestamp: rfc3339(),
        ...(body["spec"] !== undefined && !NO_GENERATION.has(type.kind) ? { generation: 1 } : {}),
      },
    } as unknown as Obj;
    delete (obj.metadata as Record<string, unknown>)["resourceVersion"];
    if (!type.namespaced) delete obj.metadata["namespace"];
    obj = this.defaults(type, obj);
    this.validate(type, obj);
    const stored = this.store.put(type, obj);
    if (type.kind === "Namespace") this.createDefaultServiceAccount(name);
    return stored;
  }

  private defaults(type: ResourceType, obj: Obj): Obj {
    if (type.group === "apps" && type.kind !== "DaemonSet") return replicasDefault(obj);
    if (type.group === "admissionregistration.k8s.io") return webhookConfigurationDefaults(obj);
    if (type.group !== "") return obj;
    switch (type.kind) {
      case "Pod": {
        const containers = ((obj["spec"] as Record<string, unknown> | undefined)?.["containers"] ?? []) as Array<Record<string, unknown>>;
        if (!containers.length) throw invalid(type, obj.metadata.name, "spec.containers", "Required value");
        containers.forEach((c, i) => { if (!c["image"]) throw invalid(type, obj.metadata.name, `spec.containers[${i}].image`, "Required value"); });
        return podDefaults(obj);
      }
      case "Namespace": return namespaceDefaults(obj);
      case "Secret": return secretDefaults(obj);
      case "Service": return this.clusterIPs.assign(serviceDefaults(obj));
      case "Endpoints": return endpointsDefaults(obj);
      default: return obj;
    }
  }

  /** Refuses with one 422 naming every rule broken, before anything is stored. */
  private validate(type: ResourceType, obj: Obj, current?: Obj): void {
    const errors = [...validateObject(type, obj), ...(current ? validateUpdate(type, current, obj) : [])];
    if (errors.length) throw invalidObject(type, obj.metadata.name, errors);
  }

  createDefaultServiceAccount(ns: string): void {
    const sa = typeOf("serviceaccounts");
    if (!this.store.get(sa, ns, "default")) this.create(sa, ns, { metadata: { name: "default" } } as unknown as Obj);
  }

  /** PUT: `subresource` "status" writes only the status. */
  update(type: ResourceType, ns: string | undefined, name: string, body: Obj, subresource?: string): Obj {
    const current = this.get(type, ns, name);
    const meta = (body?.metadata ?? {}) as Record<string, unknown>;
    if (meta["name"] !== undefined && meta["name"] !== name) throw badRequest(`the name of the object (${String(meta["name"])}) does not match the name on the URL (${name})`);
    if (meta["resourceVersion"] !== undefined && meta["resourceVersion"] !== "" && meta["resourceVersion"] !== current.metadata.resourceVersion) throw conflict(type, name);
    return this.write(type, current, body, subresource);
  }

  patch(type: ResourceType, ns: string | undefined, name: string, contentType: string, patch: Json, subresource?: string): Obj {
    const current = this.get(type, ns, name);
    const patched = applyPatch(contentType, current as unknown as Json, patch) as unknown as Obj;
    const rv = (patched?.metadata as Record<string, unknown> | undefined)?.["resourceVersion"];
    if (rv !== undefined && rv !== current.metadata.resourceVersion) throw conflict(type, name);
    return this.write(type, current, patched, subresource);
  }

  private write(type: ResourceType, current: Obj, body: Obj, subresource?: string): Obj {
    if (subresource === "status") {
      return this.store.put(type, { ...current, status: body["status"] } as Obj);
    }
    const meta = (body.metadata ?? {}) as Record<string, unknown>;
    let next = {
      ...body,
      apiVersion: current["apiVersion"],
      kind: current["kind"],
      metadata: {
        ...meta,
        name: current.metadata.name,
        namespace: current.metadata.namespace,
        uid: current.metadata.uid,
        creationTimestamp: current.metadata.creationTimestamp,
        ...(current.metadata["deletionTimestamp"] ? { deletionTimestamp: current.metadata["deletionTimestamp"], deletionGracePeriodSeconds: current.metadata["deletionGracePeriodSeconds"] } : {}),
      },
    } as unknown as Obj;
    if (!type.namespaced) delete next.metadata["namespace"];
    if (hasStatus(type)) {
      if (current["status"] === undefined) delete next["status"];
      else next["status"] = current["status"];
    }
    // As on a real server, what a pod update may change is checked on the defaulted spec.
    if (type.kind === "Pod" && type.group === "") next["spec"] = podDefaults(next)["spec"];
    if (type.kind === "Secret" && type.group === "") next = secretDefaults(next);
    if (type.kind === "Service" && type.group === "") next = this.clusterIPs.keep(current, next);
    if (type.kind === "Endpoints" && type.group === "") next = endpointsDefaults(next);
    this.validate(type, next, current);
    const generation = current.metadata["generation"] as number | undefined;
    if (generation !== undefined) next.metadata["generation"] = isDeepStrictEqual(next["spec"], current["spec"]) ? generation : generation + 1;
    return this.store.put(type, next);
  }

  delete(type: ResourceType, ns: string | undefined, name: string, graceSeconds: number | undefined): Obj | Record<string, unknown> {
    const current = this.get(type, ns, name);
    if (type.kind === "Pod" && type.group === "") return this.pods.deletePod(current, graceSeconds);
    if (type.kind === "Namespace" && type.group === "") this.emptyNamespace(name);
    this.store.remove(type, type.namespaced ? ns : undefined, name);
    return {
      kind: "Status", apiVersion: "v1", metadata: {}, status: "Success",
      details: { name, ...(type.group ? { group: type.group } : {}), kind: type.plural, uid: current.metadata.uid },
    };
  }

  /** Deleting a namespace deletes what is in it; its pods are killed at once. */
  private emptyNamespace(ns: string): void {
    for (const t of RESOURCE_TYPES.filter((r) => r.namespaced)) {
      for (const o of this.store.list(t, ns)) {
        if (t.kind === "Pod" && t.group === "") this.pods.deletePod(o, 0);
        else this.store.remove(t, ns, o.metadata.name);
      }
    }
  }
}
