// Services on the wire, for the docker runtime: this kube-sim's slot of the service range
// (slot.ts), its kube-proxy (proxy-rules.ts through iptables.ts: rules rewritten whenever a
// Service or Endpoints changes, removed when kube-sim stops, and a killed kube-sim's removed
// at the next start), and its cluster DNS (dns-server.ts), listening on the Docker bridge's
// gateway and reached, as in a real cluster, at the ClusterIP `.10` of the Service
// kube-system/kube-dns. Without the docker runtime, or without iptables, Services still get
// ClusterIPs and Endpoints from the API, and nothing routes them.
import { execFile } from "node:child_process";
import { getServers } from "node:dns";
import { readFile } from "node:fs/promises";
import { promisify } from "node:util";
import type { Crud } from "../api/crud.js";
import { keyOf, typeOf } from "../resources.js";
import type { Obj, Store } from "../store.js";
import { numberToIp, parseCidr, type Cidr } from "./cidr.js";
import { answer, CLUSTER_DOMAIN } from "./dns-answer.js";
import { startDnsServer, type DnsServer } from "./dns-server.js";
import type { Subset } from "./endpoints.js";
import { restore, save } from "./iptables.js";
import type { ClusterDns } from "./pod-dns.js";
import { removalRules, serviceRules, setupRules, slotsIn, type ProxyScope } from "./proxy-rules.js";
import { claimFreeSlot, claimSlot, type Slot } from "./slot.js";

const exec = promisify(execFile);
/** The range ClusterIPs come from when nothing routes them. */
export const UNROUTED_RANGE = "10.96.0.0/16";
const SERVICES = typeOf("services");
const ENDPOINTS = typeOf("endpoints");
/** kube-dns's address in the slot's range, as 10.96.0.10 is on a kubeadm cluster. */
const DNS_HOST_PART = 10;

export interface ServiceNetwork {
  readonly serviceRange: Cidr;
  /** One line: how Services are routed, or why they are not. */
  readonly summary: string;
  /** Where pods (and the machine) send DNS queries: kube-dns's ClusterIP; undefined when Services are not routed. */
  readonly clusterDns: ClusterDns | undefined;
  /** Once the API serves: kube-dns, the DNS server and the rules. */
  start(store: Store, crud: Crud): Promise<void>;
  stop(): Promise<void>;
}

export function unroutedNetwork(why: string): ServiceNetwork {
  return {
    serviceRange: parseCidr(UNROUTED_RANGE),
    summary: `kube-sim does not route Services (${why}): ClusterIPs from ${UNROUTED_RANGE} reach nothing`,
    clusterDns: undefined,
    start: async () => undefined,
    stop: async () => undefined,
  };
}

export interface RoutedNetworkOptions {
  /** Resolvers for names outside the cluster; default the machine's (dns.getServers()). */
  upstreamDns?: string[];
}

/** Claims a slot, removes what killed kube-sims left in iptables, and installs this one's jumps; throws when iptables cannot be used. */
export async function routedNetwork(options: RoutedNetworkOptions = {}): Promise<ServiceNetwork> {
  const bridge = await dockerBridge();
  const candidates = new Set([...slotsIn(await save("nat")), ...slotsIn(await save("filter"))]);
  const slot = await claimFreeSlot();
  const range = parseCidr(`10.96.${slot.n}.0/24`);
  const scope: ProxyScope = {
    slot: slot.n, pid: process.pid, serviceCidr: range.text, bridgeCidr: bridge.cidr,
    bridgeNetfilter: (await readFile("/proc/sys/net/bridge/bridge-nf-call-iptables", "utf8").catch(() => "0")).trim() === "1",
  };
  let cleaned: number;
  try {
    cleaned = await removeLeftoverSlots(slot, candidates);
    const setup = setupRules(scope);
    await restore(setup.nat);
    await restore(setup.filter);
  } catch (err) {
    await removeSlotRules(slot.n).catch(() => undefined);
    await slot.release();
    throw err;
  }
  const dnsIp = numberToIp(range.base + DNS_HOST_PART);
  const clusterDns: ClusterDns = { server: dnsIp, domain: CLUSTER_DOMAIN };
  let dns: DnsServer | undefined;
  let unsubscribe = () => {};
  let chains = new Set<string>();
  let syncing = Promise.resolve();
  let queued = false;
  let stopped = false;

  const sync = (store: Store) => {
    if (queued || stopped) return;
    queued = true;
    syncing = syncing.then(async () => {
      queued = false;
      if (stopped) return;
      try {
        const services = store.list(SERVICES).map((service) => ({
          service, subsets: ((store.get(ENDPOINTS, service.metadata.namespace, service.metadata.name)?.["subsets"] ?? []) as Subset[]),
        }));
        const rules = serviceRules(scope, services, chains);
        await restore(rules.text);
        chains = rules.chains;
      } catch (err) {
        // The last rules stay; the next change tries again.
        console.error(`kube-sim: the Services' iptables rules could not be updated: ${(err as Error).message}`);
      }
    });
  };

  return {
    serviceRange: range,
    clusterDns,
    get summary() {
      return `kube-sim routes Services: ClusterIPs from ${range.text} by iptables (chains ${`KSIM${slot.n}-*`}), cluster DNS at ${dnsIp}`
        + `${dns ? ` (${dns.host}:${dns.port})` : ""}${scope.bridgeNetfilter ? "" : "; br_netfilter is off: pods' connections to Services are masqueraded"}`
        + `${cleaned ? `; ${cleaned} killed kube-sim(s)' rules removed` : ""}`;
    },
    start: async (store, crud) => {
      dns = await startDnsServer({
        host: bridge.gateway,
        upstream: options.upstreamDns ?? getServers(),
        answer: (query) => answer(query, {
          service: (ns, name) => store.get(SERVICES, ns, name),
          endpoints: (ns, name) => store.get(ENDPOINTS, ns, name),
        }),
      });
      createKubeDns(crud, dnsIp, bridge.gateway, dns.port);
      unsubscribe = store.subscribe((c) => { if (c.resource === keyOf(SERVICES) || c.resource === keyOf(ENDPOINTS)) sync(store); });
      sync(store);
      await syncing;
    },
    stop: async () => {
      stopped = true;
      unsubscribe();
      await syncing;
      await dns?.close();
      await removeSlotRules(slot.n).catch((err: Error) => console.error(`kube-sim: its iptables rules could not be removed: ${err.message}`));
      await slot.release();
    },
  };
}

/** The Docker bridge's name, gateway address and subnet. */
async function dockerBridge(): Promise<{ name: string; gateway: string; cidr: string }> {
  let name = "docker0";
  try {
    name = (await exec("docker", ["network", "inspect", "bridge", "--format", `{{index .Options "com.docker.network.bridge.name"}}`], { timeout: 20_000 })).stdout.trim() || name;
    const [link] = JSON.parse((await exec("ip", ["-j", "-4", "addr", "show", "dev", name], { timeout: 20_000 })).stdout) as Array<{ addr_info?: Array<{ local: string; prefixlen: number }> }>;
    const address = link?.addr_info?.[0];
    if (!address) throw new Error("it has no IPv4 address");
    return { name, gateway: address.local, cidr: parseCidr(`${address.local}/${address.prefixlen}`).text };
  } catch (err) {
    throw new Error(`Docker's bridge ${name} cannot be read: ${(err as Error).message.split("\n")[0]}`, { cause: err });
  }
}

/** Removes the rules of every slot among `candidates` that no running kube-sim holds; how many there were. */
async function removeLeftoverSlots(own: Slot, candidates: Set<number>): Promise<number> {
  let removed = 0;
  for (const n of new Set([own.n, ...candidates])) {
    const held = n === own.n ? undefined : await claimSlot(n);
    if (n !== own.n && !held) continue;
    try {
      if (await removeSlotRules(n)) removed++;
    } finally {
      await held?.release();
    }
  }
  return removed;
}

/** Removes a slot's chains and the jumps to them from both tables; whether there were any. Only the slot's holder may call it. */
async function removeSlotRules(n: number): Promise<boolean> {
  let found = false;
  for (const table of ["nat", "filter"] as const) {
    const rules = removalRules(await save(table), n);
    if (!rules) continue;
    found = true;
    await restore(rules);
  }
  return found;
}

/** The Service pods' resolv.conf names, and its Endpoints: this process's DNS server on the bridge. */
function createKubeDns(crud: Crud, clusterIP: string, host: string, port: number): void {
  const labels = { "k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS" };
  const ports = [{ name: "dns", protocol: "UDP" }, { name: "dns-tcp", protocol: "TCP" }];
  crud.create(SERVICES, "kube-system", {
    metadata: { name: "kube-dns", labels },
    spec: { clusterIP, ports: ports.map((p) => ({ ...p, port: 53, targetPort: port })) },
  } as unknown as Obj);
  crud.create(ENDPOINTS, "kube-system", {
    metadata: { name: "kube-dns", labels },
    subsets: [{ addresses: [{ ip: host }], ports: ports.map((p) => ({ ...p, port })) }],
  } as unknown as Obj);
}
