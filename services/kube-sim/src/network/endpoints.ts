// What the endpoints and EndpointSlice controllers compute for a Service with a selector:
// the pods it selects that have an IP, each Service port's targetPort resolved in the pod
// (a number, or a named container port), grouped by the ports they resolve to. Ready is the
// pod's Ready condition: the kubelet runs no probes, so a pod is ready once its containers
// run. Pure, so the controller (endpoints-controller.ts) only reads and writes.
import { createHash } from "node:crypto";
import type { Obj } from "../store.js";
import { HEADLESS } from "./cluster-ips.js";

type Rec = Record<string, unknown>;

export interface EndpointPort { name?: string; port: number; protocol?: string }
export interface EndpointAddress {
  ip: string;
  nodeName?: string;
  hostname?: string;
  targetRef: { kind: "Pod"; namespace: string; name: string; uid: string };
}
export interface Subset { addresses?: EndpointAddress[]; notReadyAddresses?: EndpointAddress[]; ports?: EndpointPort[] }

/** One selected pod: its address, what it resolves the Service's ports to, and its state. */
interface Member { address: EndpointAddress; ports: EndpointPort[]; ready: boolean; terminating: boolean }

const specOf = (o: Obj) => (o["spec"] ?? {}) as Rec;

export const selectorOf = (svc: Obj) => specOf(svc)["selector"] as Record<string, string> | undefined;

const selects = (selector: Record<string, string>, pod: Obj) =>
  Object.entries(selector).every(([k, v]) => pod.metadata.labels?.[k] === v);

const isReady = (pod: Obj) =>
  (((pod["status"] as Rec | undefined)?.["conditions"] ?? []) as Rec[]).some((c) => c["type"] === "Ready" && c["status"] === "True");

/** A Service port's targetPort in a pod: a number as it is, a name as the pod's container port of that name and protocol. */
function resolvePort(port: Rec, pod: Obj): number | undefined {
  const target = port["targetPort"] ?? port["port"];
  if (typeof target === "number") return target;
  if (/^\d+$/.test(String(target))) return Number(target);
  const protocol = String(port["protocol"] ?? "TCP");
  for (const c of (specOf(pod)["containers"] ?? []) as Rec[]) {
    for (const p of (c["ports"] ?? []) as Rec[]) {
      if (p["name"] === target && String(p["protocol"] ?? "TCP") === protocol) return Number(p["containerPort"]);
    }
  }
  return undefined;
}

function members(svc: Obj, pods: Obj[]): Member[] {
  const selector = selectorOf(svc);
  if (!selector) return [];
  const spec = specOf(svc);
  const servicePorts = (spec["ports"] ?? []) as Rec[];
  const headlessWithoutPorts = spec["clusterIP"] === HEADLESS && servicePorts.length === 0;
  const out: Member[] = [];
  for (const pod of pods) {
    const status = (pod["status"] ?? {}) as Rec;
    const ip = status["podIP"] as string | undefined;
    const phase = status["phase"];
    if (pod.metadata.namespace !== svc.metadata.namespace || !ip || phase === "Succeeded" || phase === "Failed" || !selects(selector, pod)) continue;
    const ports = servicePorts.flatMap((p): EndpointPort[] => {
      const port = resolvePort(p, pod);
      return port === undefined ? [] : [{ ...(p["name"] ? { name: String(p["name"]) } : {}), port, protocol: String(p["protocol"] ?? "TCP") }];
    });
    if (!ports.length && !headlessWithoutPorts) continue;
    const podSpec = specOf(pod);
    const hostname = podSpec["hostname"] && podSpec["subdomain"] === svc.metadata.name ? String(podSpec["hostname"]) : undefined;
    out.push({
      address: {
        ip, ...(podSpec["nodeName"] ? { nodeName: String(podSpec["nodeName"]) } : {}), ...(hostname ? { hostname } : {}),
        targetRef: { kind: "Pod", namespace: pod.metadata.namespace!, name: pod.metadata.name, uid: pod.metadata.uid },
      },
      ports,
      ready: isReady(pod) || spec["publishNotReadyAddresses"] === true,
      terminating: !!pod.metadata["deletionTimestamp"],
    });
  }
  return out;
}

const byIp = (a: { ip: string }, b: { ip: string }) => a.ip.localeCompare(b.ip, "en", { numeric: true });
const portsKey = (ports: EndpointPort[]) => JSON.stringify([...ports].sort((a, b) => (a.name ?? "").localeCompare(b.name ?? "") || a.port - b.port));

function grouped(list: Member[]): Map<string, Member[]> {
  const groups = new Map<string, Member[]>();
  for (const m of list) {
    const key = portsKey(m.ports);
    groups.set(key, [...(groups.get(key) ?? []), m]);
  }
  return new Map([...groups.entries()].sort(([a], [b]) => a.localeCompare(b)));
}

/** The Endpoints' subsets: pods not being deleted, ready ones as addresses, the others as notReadyAddresses. */
export function endpointSubsets(svc: Obj, pods: Obj[]): Subset[] {
  const live = members(svc, pods).filter((m) => !m.terminating);
  return [...grouped(live).values()].map((group) => {
    const ready = group.filter((m) => m.ready).map((m) => m.address).sort(byIp);
    const notReady = group.filter((m) => !m.ready).map((m) => m.address).sort(byIp);
    const ports = group[0]!.ports;
    return { ...(ready.length ? { addresses: ready } : {}), ...(notReady.length ? { notReadyAddresses: notReady } : {}), ...(ports.length ? { ports } : {}) };
  });
}

export interface Slice {
  name: string;
  endpoints: Array<{ addresses: string[]; conditions: { ready: boolean; serving: boolean; terminating: boolean }; nodeName?: string; hostname?: string; targetRef: EndpointAddress["targetRef"] }>;
  ports: EndpointPort[];
}

/** The EndpointSlices: one per set of resolved ports, terminating pods kept with `terminating: true`, named after the Service and that set. */
export function endpointSlices(svc: Obj, pods: Obj[]): Slice[] {
  return [...grouped(members(svc, pods)).entries()].map(([key, group]) => ({
    name: `${svc.metadata.name}-${createHash("sha256").update(`${svc.metadata.uid}/${key}`).digest("hex").slice(0, 5)}`,
    endpoints: group.sort((a, b) => byIp(a.address, b.address)).map(({ address, ready, terminating }) => ({
      addresses: [address.ip],
      conditions: { ready: ready && !terminating, serving: ready, terminating },
      ...(address.nodeName ? { nodeName: address.nodeName } : {}),
      ...(address.hostname ? { hostname: address.hostname } : {}),
      targetRef: address.targetRef,
    })),
    ports: group[0]!.ports,
  }));
}
