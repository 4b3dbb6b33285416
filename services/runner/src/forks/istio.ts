// Istio's share of routing (EPHEMERA_ROUTING_MESH=istio), as a pure function: for a
// baseline Service that has forks, the VirtualService that sends a request carrying a
// sandbox's routing key to that sandbox's fork Service, and every other request to the
// baseline. One VirtualService per baseline Service, the union over every sandbox forking
// a workload behind it; the fork reconciler (mesh.ts) keeps it and removes it with the last fork.
import { BASELINE_SERVICE_LABEL } from "./build.js";

type Obj = { [key: string]: unknown };

/**
 * networking.istio.io/v1: the API Istio has served as GA since 1.22 (v1beta1 and v1alpha3
 * are still served, as older names of the same schema).
 */
export const VIRTUAL_SERVICE = { apiVersion: "networking.istio.io/v1", kind: "VirtualService", plural: "virtualservices" } as const;

/** On ephemera's VirtualServices (with BASELINE_SERVICE_LABEL): the mesh that reads them. */
export const MESH_LABEL = "ephemera.dev/mesh";

/** Pure: the VirtualService of a baseline Service (deterministic, so it is found again and replaced). */
export const virtualServiceName = (service: string) => `ephemera-${service}`;

export interface BaselineService {
  name: string;
  namespace: string;
  /** Its TCP ports. */
  ports: number[];
}

/** A sandbox's fork Service standing for the baseline Service. */
export interface ForkRoute {
  routingKey: string;
  /** Its name, in the baseline Service's namespace. */
  service: string;
  ports: number[];
}

/** A routing key's member in a W3C `baggage` list: members split by `,`, properties after `;`, spaces allowed around each. */
const listMember = (key: string, ends: string) => `^(.*,)?[ \\t]*sd-routing-key[ \\t]*=[ \\t]*${key}[ \\t]*([${ends}].*)?$`;

/**
 * Pure: the matches (any one) of a request carrying `routingKey`, in each of the headers a
 * routing key travels in: `baggage` and `tracestate` as lists (other members allowed),
 * `ot-baggage-sd-routing-key` and `uberctx-sd-routing-key` exactly. The regexes are RE2 as
 * Istio reads them (matching the whole value); a key is [a-z0-9], so it needs no escaping.
 */
export function routingKeyMatches(routingKey: string): Obj[] {
  if (!/^[a-z0-9]+$/.test(routingKey)) throw new Error(`routing key "${routingKey}" is not lowercase alphanumeric`);
  return [
    { headers: { baggage: { regex: listMember(routingKey, ";,") } } },
    { headers: { "ot-baggage-sd-routing-key": { exact: routingKey } } },
    { headers: { "uberctx-sd-routing-key": { exact: routingKey } } },
    // A tracestate value may hold `;`: only `,` ends a member.
    { headers: { tracestate: { regex: listMember(routingKey, ",") } } },
  ];
}

/**
 * Pure: the VirtualService of `baseline`, routing each fork's routing key to its fork
 * Service (sandboxes in routing-key order), then everything else to the baseline. A
 * Service with one port gets one route per sandbox; with several, one per sandbox and port,
 * each matching its port, since Istio leaves a destination without a port undefined for a
 * Service with several. A fork Service without a port the baseline has gets no route there.
 */
export function buildVirtualService(baseline: BaselineService, forks: ForkRoute[], clusterDomain = "cluster.local"): Obj {
  const host = (service: string) => `${service}.${baseline.namespace}.svc.${clusterDomain}`;
  const ports = [...new Set(baseline.ports)].sort((a, b) => a - b);
  const sorted = [...forks].sort((a, b) => a.routingKey.localeCompare(b.routingKey));
  const destination = (service: string, port: number | undefined) => ({ host: host(service), ...(port ? { port: { number: port } } : {}) });
  const http: Obj[] = [];
  if (ports.length <= 1) {
    const port = ports[0];
    for (const f of sorted) {
      if (port !== undefined && !f.ports.includes(port)) continue;
      http.push({ name: `sandbox-${f.routingKey}`, match: routingKeyMatches(f.routingKey), route: [{ destination: destination(f.service, port) }] });
    }
    http.push({ name: "baseline", route: [{ destination: destination(baseline.name, port) }] });
  } else {
    for (const f of sorted) {
      for (const port of ports.filter((p) => f.ports.includes(p))) {
        http.push({
          name: `sandbox-${f.routingKey}-${port}`,
          match: routingKeyMatches(f.routingKey).map((m) => ({ ...m, port })),
          route: [{ destination: destination(f.service, port) }],
        });
      }
    }
    for (const port of ports) http.push({ name: `baseline-${port}`, match: [{ port }], route: [{ destination: destination(baseline.name, port) }] });
  }
  return {
    apiVersion: VIRTUAL_SERVICE.apiVersion,
    kind: VIRTUAL_SERVICE.kind,
    metadata: {
      name: virtualServiceName(baseline.name),
      namespace: baseline.namespace,
      labels: { [MESH_LABEL]: "istio", [BASELINE_SERVICE_LABEL]: baseline.name },
    },
    spec: { hosts: [baseline.name, host(baseline.name)], http },
  };
}
