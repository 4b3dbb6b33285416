// The endpoints and EndpointSlice controllers: every Service with a selector has an
// Endpoints object of its name and EndpointSlices labelled with it, kept equal to what
// endpoints.ts computes from the namespace's pods; they go with the Service. A Service
// without a selector is left alone: its Endpoints are whoever wrote them (kube-dns's are
// kube-sim's own). Changes are gathered and written after the store's write that caused them.
import { isDeepStrictEqual } from "node:util";
import type { Crud } from "../api/crud.js";
import { findType, keyOf, typeOf } from "../resources.js";
import type { Change, Obj, Store } from "../store.js";
import { HEADLESS } from "./cluster-ips.js";
import { endpointSlices, endpointSubsets, selectorOf } from "./endpoints.js";

type Rec = Record<string, unknown>;

export const SERVICE_NAME_LABEL = "kubernetes.io/service-name";
const MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by";
const MANAGED_BY = "endpointslice-controller.k8s.io";
const HEADLESS_LABEL = "service.kubernetes.io/headless";

const SERVICES = typeOf("services");
const PODS = typeOf("pods");
const ENDPOINTS = typeOf("endpoints");
const SLICES = findType("discovery.k8s.io", "v1", "endpointslices")!;

export function startEndpointsController(store: Store, crud: Crud): () => void {
  /** `ns/name` of a Service to sync, or `ns/` for every Service of the namespace. */
  const dirty = new Set<string>();
  let scheduled = false;
  const mark = (ns: string | undefined, name = "") => {
    dirty.add(`${ns ?? ""}/${name}`);
    if (scheduled) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      const keys = [...dirty];
      dirty.clear();
      for (const key of keys) {
        const [ns = "", name = ""] = key.split("/");
        const names = name ? [name] : store.list(SERVICES, ns).map((s) => s.metadata.name);
        for (const n of names) syncService(store, crud, ns, n);
      }
    });
  };
  return store.subscribe((c: Change) => {
    const { namespace, name, labels } = c.object.metadata;
    if (c.resource === keyOf(SERVICES)) mark(namespace, name);
    else if (c.resource === keyOf(PODS)) mark(namespace);
    else if (c.type === "DELETED" && c.resource === keyOf(ENDPOINTS)) mark(namespace, name);
    else if (c.type === "DELETED" && c.resource === keyOf(SLICES) && labels?.[SERVICE_NAME_LABEL]) mark(namespace, labels[SERVICE_NAME_LABEL]);
  });
}

function syncService(store: Store, crud: Crud, ns: string, name: string): void {
  try {
    const svc = store.get(SERVICES, ns, name);
    const slices = store.list(SLICES, ns).filter((s) => s.metadata.labels?.[SERVICE_NAME_LABEL] === name && s.metadata.labels?.[MANAGED_BY_LABEL] === MANAGED_BY);
    if (!svc) {
      if (store.get(ENDPOINTS, ns, name)) crud.delete(ENDPOINTS, ns, name, undefined);
      for (const s of slices) crud.delete(SLICES, ns, s.metadata.name, undefined);
      return;
    }
    if (!selectorOf(svc)) return;
    const pods = store.list(PODS, ns);
    const labels = { ...(svc.metadata.labels ?? {}), ...((svc["spec"] as Rec)["clusterIP"] === HEADLESS ? { [HEADLESS_LABEL]: "" } : {}) };
    const subsets = endpointSubsets(svc, pods);
    put(store, crud, ENDPOINTS, ns, { metadata: { name, namespace: ns, labels }, ...(subsets.length ? { subsets } : {}) }, ["subsets"]);
    const wanted = endpointSlices(svc, pods);
    // As the real controller keeps one: a Service with no endpoints still has a slice, empty.
    if (!wanted.length) wanted.push({ name: `${name}-empty`, endpoints: [], ports: [] });
    const owner = { apiVersion: "v1", kind: "Service", name, uid: svc.metadata.uid, controller: true, blockOwnerDeletion: true };
    for (const slice of wanted) {
      put(store, crud, SLICES, ns, {
        metadata: { name: slice.name, namespace: ns, labels: { ...labels, [SERVICE_NAME_LABEL]: name, [MANAGED_BY_LABEL]: MANAGED_BY }, ownerReferences: [owner] },
        addressType: "IPv4", endpoints: slice.endpoints, ports: slice.ports,
      }, ["addressType", "endpoints", "ports"]);
    }
    for (const s of slices) if (!wanted.some((w) => w.name === s.metadata.name)) crud.delete(SLICES, ns, s.metadata.name, undefined);
  } catch (err) {
    // The namespace went while this waited: its objects went with it.
    if (!store.get(typeOf("namespaces"), undefined, ns)) return;
    throw err;
  }
}

/** Creates the object, or updates it when its labels, owners or `fields` differ. */
function put(store: Store, crud: Crud, type: typeof ENDPOINTS, ns: string, body: Rec & { metadata: Rec & { name: string } }, fields: string[]): void {
  const current = store.get(type, ns, body.metadata.name);
  if (!current) {
    crud.create(type, ns, body as unknown as Obj);
    return;
  }
  const same = isDeepStrictEqual(current.metadata.labels ?? {}, body.metadata["labels"] ?? {})
    && isDeepStrictEqual(current.metadata["ownerReferences"], body.metadata["ownerReferences"])
    && fields.every((f) => isDeepStrictEqual(current[f], body[f]));
  if (same) return;
  const next: Rec = { ...current, metadata: { ...current.metadata, ...body.metadata } };
  for (const f of fields) {
    if (body[f] === undefined) delete next[f];
    else next[f] = body[f];
  }
  crud.update(type, ns, body.metadata.name, next as Obj);
}
