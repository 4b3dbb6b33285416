// kube-proxy's iptables mode, as iptables-restore input: the ClusterIP:port of each Service
// port is DNATed to one of its ready endpoints, chosen at random (`-m statistic`), in chains
// of this kube-sim's own (`KSIM<slot>-…`), jumped to from PREROUTING (pods) and OUTPUT (the
// machine). A connection a pod makes to a Service that lands on that same pod is
// masqueraded (else the pod answers itself from its own address); so is every connection
// from the bridge when bridged packets skip iptables (br_netfilter off), so that replies come
// back through the host. Whatever is left addressed to the service range (no endpoint, an
// unallocated address) is rejected, so it never leaves the machine. Pure.
import { createHash } from "node:crypto";
import type { Obj } from "../store.js";
import { HEADLESS } from "./cluster-ips.js";
import type { Subset } from "./endpoints.js";

type Rec = Record<string, unknown>;

export interface ProxyScope {
  slot: number;
  pid: number;
  /** The range ClusterIPs come from: traffic to it that no rule took is rejected. */
  serviceCidr: string;
  /** Docker's bridge subnet, masqueraded to Services when br_netfilter is off. */
  bridgeCidr: string;
  bridgeNetfilter: boolean;
}

const MASQ_MARK = "0x4000/0x4000";
export const CHAIN_PREFIX = "KSIM";
/** A chain of this slot; every one is at most 28 characters, iptables' limit. */
const chain = (slot: number, name: string) => `${CHAIN_PREFIX}${slot}-${name}`;
export const servicesChain = (slot: number) => chain(slot, "SERVICES");
const postroutingChain = (slot: number) => chain(slot, "POSTROUTING");
const filterChain = (slot: number) => chain(slot, "FILTER");
const hash = (text: string) => createHash("sha256").update(text).digest("base64url").replace(/[-_]/g, "").slice(0, 12).toUpperCase();
const comment = (scope: ProxyScope) => `-m comment --comment "kube-sim slot ${scope.slot} pid ${scope.pid}"`;

/** The jumps into this slot's chains, and the filter chain rejecting what is left for the service range: once, at start. */
export function setupRules(scope: ProxyScope): { nat: string; filter: string } {
  const jump = (builtin: string, target: string) => `-I ${builtin} 1 ${comment(scope)} -j ${target}`;
  return {
    nat: [
      "*nat",
      `:${servicesChain(scope.slot)} - [0:0]`,
      `:${postroutingChain(scope.slot)} - [0:0]`,
      jump("PREROUTING", servicesChain(scope.slot)),
      jump("OUTPUT", servicesChain(scope.slot)),
      jump("POSTROUTING", postroutingChain(scope.slot)),
      "COMMIT", "",
    ].join("\n"),
    filter: [
      "*filter",
      `:${filterChain(scope.slot)} - [0:0]`,
      `-A ${filterChain(scope.slot)} -d ${scope.serviceCidr} -m comment --comment "ClusterIPs of kube-sim slot ${scope.slot} with no ready endpoint" -j REJECT --reject-with icmp-port-unreachable`,
      jump("OUTPUT", filterChain(scope.slot)),
      jump("FORWARD", filterChain(scope.slot)),
      "COMMIT", "",
    ].join("\n"),
  };
}

export interface ServiceEndpoints { service: Obj; subsets: Subset[] }

/** The nat rules for these Services (every chain of the slot rewritten), and the chains they use; `previous` chains no longer used are deleted. */
export function serviceRules(scope: ProxyScope, services: ServiceEndpoints[], previous: ReadonlySet<string>): { text: string; chains: Set<string> } {
  const services_ = servicesChain(scope.slot);
  const chains = new Set<string>();
  const rules: string[] = [];
  if (!scope.bridgeNetfilter) rules.push(`-A ${services_} -s ${scope.bridgeCidr} -d ${scope.serviceCidr} -j MARK --set-xmark ${MASQ_MARK}`);
  const sorted = [...services].sort((a, b) => key(a.service).localeCompare(key(b.service)));
  for (const { service, subsets } of sorted) {
    const spec = (service["spec"] ?? {}) as Rec;
    const ip = spec["clusterIP"] as string | undefined;
    if (!ip || ip === HEADLESS) continue;
    for (const port of (spec["ports"] ?? []) as Rec[]) {
      const protocol = String(port["protocol"] ?? "TCP").toLowerCase();
      const name = port["name"] as string | undefined;
      const targets = subsets.flatMap((s) => {
        const p = (s.ports ?? []).find((e) => e.name === name && (e.protocol ?? "TCP").toLowerCase() === protocol);
        return p ? (s.addresses ?? []).filter((a) => a.ip).map((a) => ({ ip: a.ip, port: p.port })) : [];
      }).sort((a, b) => `${a.ip}:${a.port}`.localeCompare(`${b.ip}:${b.port}`, "en", { numeric: true }));
      if (!targets.length) continue;
      const svcChain = chain(scope.slot, `SVC-${hash(`${key(service)}:${name ?? ""}/${protocol}`)}`);
      chains.add(svcChain);
      rules.push(`-A ${services_} -d ${ip}/32 -p ${protocol} -m ${protocol} --dport ${String(port["port"])} -m comment --comment "${key(service)}:${name ?? ""}" -j ${svcChain}`);
      targets.forEach((t, i) => {
        const sep = chain(scope.slot, `SEP-${hash(`${svcChain}/${t.ip}:${t.port}`)}`);
        chains.add(sep);
        const left = targets.length - i;
        rules.push(left > 1 ? `-A ${svcChain} -m statistic --mode random --probability ${(1 / left).toFixed(10)} -j ${sep}` : `-A ${svcChain} -j ${sep}`);
        rules.push(`-A ${sep} -s ${t.ip}/32 -j MARK --set-xmark ${MASQ_MARK}`);
        rules.push(`-A ${sep} -p ${protocol} -m ${protocol} -j DNAT --to-destination ${t.ip}:${t.port}`);
      });
    }
  }
  const post = postroutingChain(scope.slot);
  const text = [
    "*nat",
    `:${services_} - [0:0]`,
    `:${post} - [0:0]`,
    ...[...chains].map((c) => `:${c} - [0:0]`),
    ...[...previous].filter((c) => !chains.has(c)).map((c) => `:${c} - [0:0]`),
    ...rules,
    `-A ${post} -m mark --mark ${MASQ_MARK} -j MASQUERADE`,
    ...[...previous].filter((c) => !chains.has(c)).map((c) => `-X ${c}`),
    "COMMIT", "",
  ].join("\n");
  return { text, chains };
}

const key = (o: Obj) => `${o.metadata.namespace ?? ""}/${o.metadata.name}`;

/** The slots that have chains or jumps in `iptables-save` output. */
export function slotsIn(saved: string): Set<number> {
  return new Set([...saved.matchAll(new RegExp(`(?:^:|-j )${CHAIN_PREFIX}(\\d+)-`, "gm"))].map((m) => Number(m[1])));
}

/** iptables-restore input removing every chain of `slot` from one table's `iptables-save` output, and the jumps to them; undefined when it has none. */
export function removalRules(saved: string, slot: number): string | undefined {
  const table = /^\*(\w+)/m.exec(saved)?.[1];
  const prefix = `${CHAIN_PREFIX}${slot}-`;
  const chains = [...saved.matchAll(/^:(\S+)/gm)].map((m) => m[1]!).filter((c) => c.startsWith(prefix));
  const jumps = saved.split("\n").filter((l) => l.startsWith("-A ") && l.includes(` -j ${prefix}`) && !l.split(" ")[1]!.startsWith(prefix));
  if (!table || (!chains.length && !jumps.length)) return undefined;
  return [
    `*${table}`,
    ...jumps.map((l) => l.replace(/^-A /, "-D ")),
    ...chains.map((c) => `:${c} - [0:0]`),
    ...chains.map((c) => `-X ${c}`),
    "COMMIT", "",
  ].join("\n");
}
