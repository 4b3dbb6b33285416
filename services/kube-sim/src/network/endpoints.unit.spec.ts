import type { Obj } from "../store.js";
import { endpointSlices, endpointSubsets } from "./endpoints.js";

const meta = (name: string, extra: Record<string, unknown> = {}) => ({ name, namespace: "ns", uid: `uid-${name}`, resourceVersion: "1", creationTimestamp: "", ...extra });

const service = (spec: Record<string, unknown>): Obj => ({ metadata: meta("web"), spec: { selector: { app: "web" }, ...spec } });

interface PodOptions { ip?: string; ready?: boolean; labels?: Record<string, string>; port?: number; phase?: string; deleting?: boolean; namespace?: string; spec?: Record<string, unknown> }
function pod(name: string, o: PodOptions = {}): Obj {
  return {
    metadata: meta(name, { labels: o.labels ?? { app: "web" }, ...(o.namespace ? { namespace: o.namespace } : {}), ...(o.deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}) }),
    spec: { nodeName: "kube-sim", containers: [{ name: "c", ports: [{ name: "http", containerPort: o.port ?? 8080 }, { name: "dns", containerPort: 5353, protocol: "UDP" }] }], ...o.spec },
    status: {
      phase: o.phase ?? "Running", ...(o.ip === "" ? {} : { podIP: o.ip ?? `172.17.0.${name.length}` }),
      conditions: [{ type: "Ready", status: o.ready === false ? "False" : "True" }],
    },
  };
}
const ref = (name: string) => ({ kind: "Pod", namespace: "ns", name, uid: `uid-${name}` });

it("lists the selected pods with an IP, ready ones as addresses and the others as notReadyAddresses, the targetPort resolved by name", () => {
  const svc = service({ ports: [{ name: "web", port: 80, targetPort: "http", protocol: "TCP" }] });
  const pods = [
    pod("b", { ip: "172.17.0.12" }), pod("a", { ip: "172.17.0.9" }), pod("slow", { ip: "172.17.0.20", ready: false }),
    pod("other", { labels: { app: "db" } }), pod("elsewhere", { namespace: "other" }), pod("pending", { ip: "" }),
    pod("done", { phase: "Succeeded" }), pod("going", { deleting: true }),
  ];
  expect(endpointSubsets(svc, pods)).toEqual([{
    addresses: [{ ip: "172.17.0.9", nodeName: "kube-sim", targetRef: ref("a") }, { ip: "172.17.0.12", nodeName: "kube-sim", targetRef: ref("b") }],
    notReadyAddresses: [{ ip: "172.17.0.20", nodeName: "kube-sim", targetRef: ref("slow") }],
    ports: [{ name: "web", port: 8080, protocol: "TCP" }],
  }]);
});

it("groups pods by the ports their named targetPort resolves to, and leaves out a pod without such a port", () => {
  const svc = service({ ports: [{ port: 80, targetPort: "http", protocol: "TCP" }] });
  const pods = [pod("a", { port: 8080 }), pod("bb", { port: 9090 }), pod("ccc", { spec: { containers: [{ name: "c" }] } })];
  expect(endpointSubsets(svc, pods).map((s) => [s.addresses?.map((a) => a.targetRef.name), s.ports])).toEqual([
    [["a"], [{ port: 8080, protocol: "TCP" }]],
    [["bb"], [{ port: 9090, protocol: "TCP" }]],
  ]);
  // A number is used as it is; a name matches the container port of the same protocol only.
  expect(endpointSubsets(service({ ports: [{ port: 53, targetPort: "dns", protocol: "UDP" }, { name: "n", port: 1, targetPort: 7, protocol: "TCP" }] }), [pod("a")])[0]!.ports)
    .toEqual([{ port: 5353, protocol: "UDP" }, { name: "n", port: 7, protocol: "TCP" }]);
});

it("takes not-ready pods as ready with publishNotReadyAddresses, gives a headless Service's pods their hostname, and leaves a Service without a selector alone", () => {
  const ports = [{ port: 80, protocol: "TCP" }];
  expect(endpointSubsets(service({ ports, publishNotReadyAddresses: true }), [pod("a", { ready: false })])[0]!.addresses).toHaveLength(1);
  const headless = service({ clusterIP: "None", ports });
  const named = pod("a", { spec: { hostname: "db-0", subdomain: "web" } });
  expect(endpointSubsets(headless, [named])[0]!.addresses![0]).toMatchObject({ hostname: "db-0" });
  expect(endpointSubsets({ metadata: meta("manual"), spec: { ports } }, [pod("a")])).toEqual([]);
});

it("keeps terminating pods in the EndpointSlices, not ready, with their serving state", () => {
  const svc = service({ ports: [{ name: "web", port: 80, targetPort: 8080, protocol: "TCP" }] });
  const slices = endpointSlices(svc, [pod("a", { ip: "172.17.0.2" }), pod("going", { ip: "172.17.0.3", deleting: true })]);
  expect(slices).toHaveLength(1);
  expect(slices[0]!.name).toMatch(/^web-[0-9a-f]{5}$/);
  expect(slices[0]!.ports).toEqual([{ name: "web", port: 8080, protocol: "TCP" }]);
  expect(slices[0]!.endpoints.map((e) => [e.addresses, e.conditions])).toEqual([
    [["172.17.0.2"], { ready: true, serving: true, terminating: false }],
    [["172.17.0.3"], { ready: false, serving: true, terminating: true }],
  ]);
});
