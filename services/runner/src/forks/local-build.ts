// A connected local workload's objects on the cluster, as a pure function of a baseline
// Service and the tunnel's addresses: a Service without a selector (the baseline Service's
// ports, labelled as ephemera's with the routing key, the sandbox and the local's name) and
// an Endpoints object of the same name pointing at the tunnel, so that the local's traffic
// enters the cluster's Service network (ClusterIP, DNS, a mesh's routes) like a fork's. Each
// Service port reaches the tunnel address whose `port` is the port's targetPort (a named
// targetPort resolved through the baseline's containers); a port no mapping serves is left out.
import { isIP } from "node:net";
import { localServiceName } from "@ephemera/kit";
import type * as pb from "@ephemera/proto";
import { labelValue } from "../driver/kube/pod.js";
import { BASELINE_SERVICE_LABEL } from "./build.js";

type Obj = { [key: string]: unknown };
type Port = { name?: string; port: number; targetPort?: number | string; protocol?: string; appProtocol?: string };

/** On a local's Service and Endpoints: the local workload's name (fork objects never carry it). */
export const LOCAL_LABEL = "ephemera.dev/local";
export const ROUTING_KEY_LABEL = "ephemera.dev/routing-key";

export interface LocalObjects {
  service: Obj;
  endpoints: Obj;
  /** Each kept port: the baseline workload's port it stands for, and the Service's. */
  routes: Array<{ workloadPort: number; port: number }>;
}

/** Pure: "10.0.0.9:41000" or "[fd00::9]:41000" as ip and port; undefined for anything else (a hostname cannot be an endpoint). */
export function parseAddress(address: string): { ip: string; port: number } | undefined {
  const m = /^\[?([^\]]+)\]?:(\d+)$/.exec(address);
  if (!m || !isIP(m[1]!)) return undefined;
  const port = Number(m[2]);
  return port > 0 && port < 65536 ? { ip: m[1]!, port } : undefined;
}

/** Pure: a Service port's targetPort as a number: itself, a container port's name resolved, or the port when unset. */
export function targetPortOf(port: Port, containerPorts: Array<{ name?: string; containerPort: number }>): number | undefined {
  if (port.targetPort === undefined || port.targetPort === "") return port.port;
  if (typeof port.targetPort === "number") return port.targetPort;
  if (/^\d+$/.test(port.targetPort)) return Number(port.targetPort);
  return containerPorts.find((c) => c.name === port.targetPort)?.containerPort;
}

/** Pure: the container ports of a workload's pod template, by name. */
export function containerPortsOf(workload: Obj): Array<{ name?: string; containerPort: number }> {
  const template = ((workload["spec"] as Obj | undefined)?.["template"] ?? {}) as { spec?: { containers?: Array<{ ports?: Array<{ name?: string; containerPort: number }> }> } };
  return (template.spec?.containers ?? []).flatMap((c) => c.ports ?? []);
}

/**
 * Pure: a local's Service and Endpoints standing for `baselineService`, or undefined when
 * none of its ports is served by a tunnel address.
 */
export function buildLocalObjects(
  baselineService: Obj, baselineWorkload: Obj,
  local: { sandbox: string; routingKey: string; local: string; addresses: pb.LocalAddress[] },
): LocalObjects | undefined {
  const meta = (baselineService["metadata"] ?? {}) as { name: string; namespace: string };
  const ports = (((baselineService["spec"] as Obj | undefined)?.["ports"] ?? []) as Port[]);
  const containers = containerPortsOf(baselineWorkload);
  const kept: Array<{ port: Port; workloadPort: number; ip: string; tunnelPort: number }> = [];
  for (const port of ports) {
    const workloadPort = targetPortOf(port, containers);
    const served = local.addresses.find((a) => a.port === workloadPort);
    const at = served && parseAddress(served.address);
    if (workloadPort !== undefined && at) kept.push({ port, workloadPort, ip: at.ip, tunnelPort: at.port });
  }
  if (!kept.length) return undefined;
  const name = localServiceName(meta.name, local.routingKey);
  const labels = {
    "ephemera.dev/sandbox": labelValue(local.sandbox), [ROUTING_KEY_LABEL]: local.routingKey,
    [LOCAL_LABEL]: labelValue(local.local), [BASELINE_SERVICE_LABEL]: meta.name,
  };
  const objMeta = { name, namespace: meta.namespace, labels, annotations: { "ephemera.dev/local-of": `${local.sandbox}/${local.local}` } };
  // A selector-less Service's targetPort means nothing to the proxy: the Endpoints' port (by name) is where traffic goes.
  const servicePorts = kept.map(({ port, tunnelPort }) => ({
    ...(port.name ? { name: port.name } : {}), port: port.port, targetPort: tunnelPort, protocol: port.protocol ?? "TCP",
    ...(port.appProtocol ? { appProtocol: port.appProtocol } : {}),
  }));
  const byIp = new Map<string, Obj[]>();
  for (const { port, ip, tunnelPort } of kept) {
    byIp.set(ip, [...(byIp.get(ip) ?? []), { ...(port.name ? { name: port.name } : {}), port: tunnelPort, protocol: port.protocol ?? "TCP" }]);
  }
  return {
    service: { apiVersion: "v1", kind: "Service", metadata: objMeta, spec: { type: "ClusterIP", ports: servicePorts } },
    endpoints: {
      apiVersion: "v1", kind: "Endpoints", metadata: objMeta,
      subsets: [...byIp].map(([ip, p]) => ({ addresses: [{ ip }], ports: p })),
    },
    routes: kept.map(({ port, workloadPort }) => ({ workloadPort, port: port.port })),
  };
}
