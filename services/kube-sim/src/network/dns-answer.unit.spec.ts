import dnsPacket, { type DecodedPacket, type RecordType } from "dns-packet";
import type { Obj } from "../store.js";
import { answer, type ClusterView } from "./dns-answer.js";

const svc = (name: string, spec: Record<string, unknown>): Obj => ({ metadata: { name, namespace: "shop", uid: name, resourceVersion: "1", creationTimestamp: "" }, spec });
const objects: Record<string, Obj> = {
  web: svc("web", { clusterIP: "10.96.3.7" }),
  db: svc("db", { clusterIP: "None" }),
  empty: svc("empty", { clusterIP: "None" }),
  ext: svc("ext", { type: "ExternalName", externalName: "db.example.test" }),
};
const endpoints: Record<string, Obj> = {
  db: { metadata: { name: "db", namespace: "shop", uid: "e", resourceVersion: "1", creationTimestamp: "" }, subsets: [
    { addresses: [{ ip: "172.17.0.4", hostname: "db-0" }, { ip: "172.17.0.5", hostname: "db-1" }], notReadyAddresses: [{ ip: "172.17.0.6" }] },
  ] },
};
const view: ClusterView = {
  service: (ns, name) => (ns === "shop" ? objects[name] : undefined),
  endpoints: (ns, name) => (ns === "shop" ? endpoints[name] : undefined),
};

/** The query through the wire format and back, as the server gets it, and the answer as a client reads it. */
function ask(name: string, type: RecordType = "A") {
  const query = dnsPacket.decode(dnsPacket.encode({ type: "query", id: 7, flags: dnsPacket.RECURSION_DESIRED, questions: [{ type, name }] })) as DecodedPacket;
  const reply = answer(query, view);
  if (!reply) return undefined;
  const decoded = dnsPacket.decode(dnsPacket.encode(reply)) as DecodedPacket & { rcode: string; flag_aa: boolean };
  return { rcode: decoded.rcode, id: decoded.id, aa: decoded.flag_aa, answers: (decoded.answers ?? []).map((a) => [a.type, (a as { data: unknown }).data]), authorities: decoded.authorities?.length ?? 0 };
}

it("answers a Service's name with its ClusterIP, authoritatively, whatever the case and trailing dot", () => {
  expect(ask("web.shop.svc.cluster.local")).toEqual({ rcode: "NOERROR", id: 7, aa: true, answers: [["A", "10.96.3.7"]], authorities: 0 });
  expect(ask("WEB.Shop.svc.cluster.local.")?.answers).toEqual([["A", "10.96.3.7"]]);
});

it("answers a headless Service with its ready endpoints' IPs, one of them by hostname, and NXDOMAIN when it has none", () => {
  expect(ask("db.shop.svc.cluster.local")?.answers).toEqual([["A", "172.17.0.4"], ["A", "172.17.0.5"]]);
  expect(ask("db-1.db.shop.svc.cluster.local")?.answers).toEqual([["A", "172.17.0.5"]]);
  expect(ask("empty.shop.svc.cluster.local")?.rcode).toBe("NXDOMAIN");
  expect(ask("db-1.web.shop.svc.cluster.local")?.rcode).toBe("NXDOMAIN");
});

it("gives NODATA (NOERROR, no record, the zone's SOA) for AAAA, NXDOMAIN for unknown names, a CNAME for ExternalName", () => {
  expect(ask("web.shop.svc.cluster.local", "AAAA")).toMatchObject({ rcode: "NOERROR", answers: [], authorities: 1 });
  expect(ask("nope.shop.svc.cluster.local")).toMatchObject({ rcode: "NXDOMAIN", answers: [], authorities: 1 });
  expect(ask("web.other.svc.cluster.local")?.rcode).toBe("NXDOMAIN");
  expect(ask("web.shop.svc.cluster.local.shop.svc.cluster.local")?.rcode).toBe("NXDOMAIN");
  expect(ask("ext.shop.svc.cluster.local")?.answers).toEqual([["CNAME", "db.example.test"]]);
});

it("leaves names outside cluster.local to the machine's resolvers", () => {
  expect(ask("registry.example.test")).toBeUndefined();
  expect(ask("web.shop.svc")).toBeUndefined();
});
