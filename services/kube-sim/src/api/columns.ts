// The columns the real server prints for Services, Endpoints and EndpointSlices (its
// printers.go), so `kubectl get svc,ep,endpointslices` reads as on a cluster.
import type { Obj } from "../store.js";

type Rec = Record<string, unknown>;

export interface Column { name: string; type: string; format: string; description: string; priority: number }
export interface Printer { columns: Column[]; cells(o: Obj, age: string): unknown[] }

const column = (name: string, type = "string", format = "", priority = 0): Column => ({ name, type, format, description: name, priority });
const NONE = "<none>";
const specOf = (o: Obj) => (o["spec"] ?? {}) as Rec;

/** At most three, then `+ N more...`, as the real printer cuts long lists. */
function firstThree(items: string[]): string {
  if (!items.length) return NONE;
  return items.length > 3 ? `${items.slice(0, 3).join(",")} + ${items.length - 3} more...` : items.join(",");
}

function externalIp(svc: Obj): string {
  const spec = specOf(svc);
  const ips = (spec["externalIPs"] ?? []) as string[];
  switch (spec["type"]) {
    case "ExternalName": return String(spec["externalName"] ?? NONE);
    case "LoadBalancer": {
      const ingress = ((((svc["status"] as Rec | undefined)?.["loadBalancer"] as Rec | undefined)?.["ingress"] ?? []) as Rec[]).map((i) => String(i["ip"] ?? i["hostname"]));
      const all = [...ingress, ...ips];
      return all.length ? all.join(",") : "<pending>";
    }
    default: return ips.length ? ips.join(",") : NONE;
  }
}

const servicePorts = (svc: Obj) => {
  const ports = ((specOf(svc)["ports"] ?? []) as Rec[]).map((p) => `${String(p["port"])}${p["nodePort"] ? `:${String(p["nodePort"])}` : ""}/${String(p["protocol"] ?? "TCP")}`);
  return ports.length ? ports.join(",") : NONE;
};

const selector = (svc: Obj) => {
  const s = Object.entries((specOf(svc)["selector"] ?? {}) as Record<string, string>).map(([k, v]) => `${k}=${v}`);
  return s.length ? s.join(",") : NONE;
};

export const PRINTERS: Record<string, Printer> = {
  services: {
    columns: [column("Name", "string", "name"), column("Type"), column("Cluster-IP"), column("External-IP"), column("Port(s)"), column("Age"), column("Selector", "string", "", 1)],
    cells: (o, age) => [o.metadata.name, specOf(o)["type"] ?? "ClusterIP", specOf(o)["clusterIP"] ?? NONE, externalIp(o), servicePorts(o), age, selector(o)],
  },
  endpoints: {
    columns: [column("Name", "string", "name"), column("Endpoints"), column("Age")],
    cells: (o, age) => [o.metadata.name, firstThree(((o["subsets"] ?? []) as Rec[]).flatMap((s) => {
      const ips = ((s["addresses"] ?? []) as Rec[]).map((a) => String(a["ip"]));
      const ports = ((s["ports"] ?? []) as Rec[]).map((p) => String(p["port"]));
      return ports.length ? ips.flatMap((ip) => ports.map((p) => `${ip}:${p}`)) : ips;
    })), age],
  },
  endpointslices: {
    columns: [column("Name", "string", "name"), column("AddressType"), column("Ports"), column("Endpoints"), column("Age")],
    cells: (o, age) => {
      const ports = ((o["ports"] ?? []) as Rec[]).map((p) => String(p["port"]));
      const addresses = ((o["endpoints"] ?? []) as Rec[]).flatMap((e) => (e["addresses"] ?? []) as string[]);
      return [o.metadata.name, o["addressType"], ports.length ? ports.join(",") : "<unset>", firstThree(addresses), age];
    },
  },
};
