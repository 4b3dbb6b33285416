// Cluster DNS answers, as CoreDNS's kubernetes plugin gives them for `cluster.local`:
// `<svc>.<ns>.svc.cluster.local` is the Service's ClusterIP (a headless Service: the IPs of
// its ready endpoints; an ExternalName Service: a CNAME), `<host>.<svc>.<ns>.svc.cluster.local`
// a headless Service's endpoint of that hostname; another name in the domain does not exist;
// names outside it are not ours (undefined: the server forwards them). Pure.
import dnsPacket, { type Answer, type DecodedPacket, type Packet } from "dns-packet";
import type { Obj } from "../store.js";
import { HEADLESS } from "./cluster-ips.js";
import type { Subset } from "./endpoints.js";

type Rec = Record<string, unknown>;

export const CLUSTER_DOMAIN = "cluster.local";
/** CoreDNS's default TTL for the kubernetes plugin's records. */
const TTL = 5;
const RCODE = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3 } as const;

export interface ClusterView {
  service(namespace: string, name: string): Obj | undefined;
  endpoints(namespace: string, name: string): Obj | undefined;
}

const soa: Answer = {
  type: "SOA", name: CLUSTER_DOMAIN, ttl: TTL,
  data: { mname: `ns.dns.${CLUSTER_DOMAIN}`, rname: `hostmaster.${CLUSTER_DOMAIN}`, serial: 1, refresh: 7200, retry: 1800, expire: 86400, minimum: TTL },
};

/** The reply to `query` (same id and question), with this rcode and these records. */
export function reply(query: DecodedPacket, rcode: number, answers: Answer[] = [], authoritative = true): Packet {
  const flags = (authoritative ? dnsPacket.AUTHORITATIVE_ANSWER : 0) | (query.flags ?? 0) & dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE | rcode;
  return {
    type: "response", id: query.id ?? 0, flags, questions: query.questions ?? [], answers,
    ...(authoritative && !answers.length ? { authorities: [soa] } : {}),
  };
}

export const serverFailure = (query: DecodedPacket) => reply(query, RCODE.SERVFAIL, [], false);

const readyIps = (endpoints: Obj | undefined, hostname?: string) => [...new Set(((endpoints?.["subsets"] ?? []) as Subset[])
  .flatMap((s) => s.addresses ?? []).filter((a) => hostname === undefined || a.hostname === hostname).map((a) => a.ip))];

/** The cluster's answer to `query`, or undefined when its name is outside the cluster domain. */
export function answer(query: DecodedPacket, view: ClusterView): Packet | undefined {
  const question = query.questions?.[0];
  if (!question) return reply(query, RCODE.FORMERR, [], false);
  const name = question.name.toLowerCase().replace(/\.$/, "");
  if (name !== CLUSTER_DOMAIN && !name.endsWith(`.${CLUSTER_DOMAIN}`)) return undefined;
  const labels = name === CLUSTER_DOMAIN ? [] : name.slice(0, -CLUSTER_DOMAIN.length - 1).split(".");
  const nxdomain = reply(query, RCODE.NXDOMAIN);
  if (labels.at(-1) !== "svc" || (labels.length !== 3 && labels.length !== 4)) return nxdomain;
  const [svcName, ns] = labels.slice(-3, -1) as [string, string];
  const hostname = labels.length === 4 ? labels[0] : undefined;
  const svc = view.service(ns, svcName);
  if (!svc) return nxdomain;
  const spec = (svc["spec"] ?? {}) as Rec;
  const wants = (type: string) => question.type === type || (question.type as string) === "ANY";
  if (spec["type"] === "ExternalName" && hostname === undefined) {
    return reply(query, RCODE.NOERROR, [{ type: "CNAME", name: question.name, ttl: TTL, data: String(spec["externalName"] ?? "") }]);
  }
  const headless = spec["clusterIP"] === HEADLESS;
  if (hostname !== undefined && !headless) return nxdomain;
  const ips = headless ? readyIps(view.endpoints(ns, svcName), hostname) : [String(spec["clusterIP"])];
  if (!ips.length) return nxdomain;
  return reply(query, RCODE.NOERROR, wants("A") ? ips.map((ip) => ({ type: "A", name: question.name, ttl: TTL, data: ip })) : []);
}
