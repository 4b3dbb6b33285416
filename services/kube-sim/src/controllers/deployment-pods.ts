// The Deployment controller's pods, when asked for (EPHEMERA_KUBE_SIM_WORKLOAD_PODS=true): each
// Deployment gets `spec.replicas` pods of its template, created through the API's create path
// (mutating webhooks included, as a ReplicaSet controller's creates are), named and owned as a
// ReplicaSet's are (`<deployment>-<template hash>-<suffix>`, label `pod-template-hash`, an owner
// reference to ReplicaSet `<deployment>-<template hash>`; no ReplicaSet object is stored). A
// changed template replaces every pod at once (no surge or maxUnavailable); a pod that ends or is
// deleted is replaced; the Deployment's deletion deletes its pods. Off by default: most of
// kube-sim's users fork Deployments whose images are nowhere to be run, and their availability
// is reported without pods (workloads.ts) either way.
import { createHash, randomBytes } from "node:crypto";
import type { Admission } from "../admission/admit.js";
import type { Crud } from "../api/crud.js";
import { findType } from "../resources.js";
import type { Change, Obj, Store } from "../store.js";

const DEPLOYMENTS = "apps/v1/deployments";
const PODS = "/v1/pods";
const OWNER = "sim.ephemera.dev/deployment";

type Rec = Record<string, unknown>;

/** Pure: the template's hash, as a ReplicaSet's name and the pods' `pod-template-hash` carry it. */
export function templateHash(template: unknown): string {
  return createHash("sha256").update(JSON.stringify(template ?? {})).digest("hex").slice(0, 10);
}

/** Pure: a pod of `deployment`'s template, as its ReplicaSet would create it (before admission). */
export function podFor(deployment: Obj, hash: string, suffix: string): Obj {
  const template = ((deployment["spec"] as Rec | undefined)?.["template"] ?? {}) as { metadata?: Rec; spec?: Rec };
  const meta = template.metadata ?? {};
  const replicaSet = `${deployment.metadata.name}-${hash}`;
  return {
    apiVersion: "v1", kind: "Pod",
    metadata: {
      name: `${replicaSet}-${suffix}`, namespace: deployment.metadata.namespace,
      labels: { ...(meta["labels"] as Record<string, string> | undefined), "pod-template-hash": hash },
      annotations: { ...(meta["annotations"] as Record<string, string> | undefined), [OWNER]: deployment.metadata.name },
      ownerReferences: [{ apiVersion: "apps/v1", kind: "ReplicaSet", name: replicaSet, uid: `${deployment.metadata.uid ?? ""}-${hash}`, controller: true, blockOwnerDeletion: true }],
    },
    spec: structuredClone(template.spec ?? {}),
  } as unknown as Obj;
}

export function startDeploymentPods(store: Store, crud: Crud, admission: Admission, warn: (line: string) => void): () => void {
  const deployments = findType("apps", "v1", "deployments")!;
  const pods = findType("", "v1", "pods")!;
  const namespaces = findType("", "v1", "namespaces")!;
  const busy = new Set<string>();
  const again = new Set<string>();

  const owned = (ns: string, name: string) => store.list(pods, ns).filter((p) => p.metadata.annotations?.[OWNER] === name);
  const ended = (p: Obj) => ["Succeeded", "Failed"].includes(String((p["status"] as Rec | undefined)?.["phase"] ?? "")) || !!p.metadata.deletionTimestamp;

  const reconcile = async (ns: string, name: string): Promise<void> => {
    const d = store.get(deployments, ns, name);
    const hash = d ? templateHash((d["spec"] as Rec | undefined)?.["template"]) : "";
    const replicas = d ? Number((d["spec"] as Rec | undefined)?.["replicas"] ?? 1) : 0;
    let current = 0;
    for (const p of owned(ns, name)) {
      if (p.metadata.labels?.["pod-template-hash"] === hash && !ended(p) && current < replicas) { current++; continue; }
      if (!p.metadata.deletionTimestamp) crud.delete(pods, ns, p.metadata.name, undefined);
    }
    // A namespace going away takes its pods with it: nothing new is made in it.
    const namespace = store.get(namespaces, undefined, ns);
    if (!namespace || namespace.metadata.deletionTimestamp) return;
    for (; d && current < replicas; current++) {
      const { object, warnings } = await admission.admitCreate(pods, ns, podFor(d, hash, randomBytes(3).toString("hex").slice(0, 5)));
      for (const w of warnings) warn(`pod of Deployment ${ns}/${name}: ${w}`);
      crud.create(pods, ns, object);
    }
  };
  const schedule = (ns: string, name: string) => {
    const key = `${ns}/${name}`;
    if (busy.has(key)) { again.add(key); return; }
    busy.add(key);
    void reconcile(ns, name).catch((err: unknown) => warn(`Deployment ${key}: its pods could not be made: ${(err as Error).message}`)).finally(() => {
      busy.delete(key);
      if (again.delete(key)) schedule(ns, name);
    });
  };

  return store.subscribe((c: Change) => {
    const ns = c.object.metadata.namespace ?? "default";
    if (c.resource === DEPLOYMENTS) {
      // Its status is the stand-in's (workloads.ts): only a change of what it asks for, or its deletion, is worked on.
      schedule(ns, c.object.metadata.name);
    } else if (c.resource === PODS) {
      const owner = c.object.metadata.annotations?.[OWNER];
      if (owner && (c.type === "DELETED" || ended(c.object))) schedule(ns, owner);
    }
  });
}
