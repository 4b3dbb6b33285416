// What the real API server fills in on create, for the kinds where clients or kubectl read
// it back: pods (restart policy, grace period, container defaults, Pending status),
// namespaces (Active), secrets (stringData folded into data), services (their ClusterIP is
// network/cluster-ips.ts's), endpoints (ports' protocol).
import type { Obj } from "../store.js";

type Rec = Record<string, unknown>;

export function podDefaults(pod: Obj): Obj {
  const spec = { ...((pod["spec"] ?? {}) as Rec) };
  spec["restartPolicy"] ??= "Always";
  spec["terminationGracePeriodSeconds"] ??= 30;
  spec["dnsPolicy"] ??= "ClusterFirst";
  spec["schedulerName"] ??= "default-scheduler";
  spec["serviceAccountName"] ??= "default";
  spec["securityContext"] ??= {};
  spec["enableServiceLinks"] ??= true;
  const container = (c: Rec): Rec => ({
    terminationMessagePath: "/dev/termination-log",
    terminationMessagePolicy: "File",
    imagePullPolicy: /:[^/]+$/.test(String(c["image"] ?? "")) && !String(c["image"]).endsWith(":latest") ? "IfNotPresent" : "Always",
    resources: {},
    ...c,
  });
  for (const list of ["initContainers", "containers"]) {
    if (Array.isArray(spec[list])) spec[list] = (spec[list] as Rec[]).map(container);
  }
  return { ...pod, spec, status: { phase: "Pending", qosClass: "BestEffort" } };
}

export function namespaceDefaults(ns: Obj): Obj {
  return {
    ...ns,
    metadata: { ...ns.metadata, labels: { ...(ns.metadata.labels ?? {}), "kubernetes.io/metadata.name": ns.metadata.name } },
    spec: { finalizers: ["kubernetes"] },
    status: { phase: "Active" },
  };
}

export function secretDefaults(secret: Obj): Obj {
  const { stringData, ...rest } = secret as Obj & { stringData?: Record<string, string> };
  const data = { ...((rest["data"] ?? {}) as Record<string, string>) };
  for (const [k, v] of Object.entries(stringData ?? {})) data[k] = Buffer.from(v).toString("base64");
  return { ...rest, type: rest["type"] ?? "Opaque", ...(Object.keys(data).length ? { data } : {}) } as Obj;
}

export function serviceDefaults(svc: Obj): Obj {
  const spec = { ...((svc["spec"] ?? {}) as Rec) };
  spec["type"] ??= "ClusterIP";
  spec["sessionAffinity"] ??= "None";
  if (Array.isArray(spec["ports"])) spec["ports"] = (spec["ports"] as Rec[]).map((p) => ({ protocol: "TCP", targetPort: p["port"], ...p }));
  return { ...svc, spec, status: { loadBalancer: {} } };
}

/** An Endpoints port's protocol is TCP unless it says otherwise. */
export function endpointsDefaults(ep: Obj): Obj {
  const subsets = ((ep["subsets"] ?? []) as Rec[]).map((s) => (Array.isArray(s["ports"]) ? { ...s, ports: (s["ports"] as Rec[]).map((p) => ({ protocol: "TCP", ...p })) } : s));
  return ep["subsets"] === undefined ? ep : { ...ep, subsets };
}

/** Deployments, stateful sets and replica sets default to one replica. */
export function replicasDefault(obj: Obj): Obj {
  const spec = (obj["spec"] ?? {}) as Rec;
  return { ...obj, spec: { replicas: 1, ...spec } };
}
