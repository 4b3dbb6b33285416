// Pure parts of a step network (network.ts): the names a runner gives what it makes, the
// subnet it takes, its nftables table and the steps' resolver configuration. Names carry
// the prefix's tag, the runner's pid and an id of its own, so two runners side by side never
// share one, and a later runner of the same prefix knows a dead one's leftovers.
import { createHash } from "node:crypto";

export type StepNetworkMode = "outside" | "none" | "host";
export const STEP_NETWORK_MODES: readonly StepNetworkMode[] = ["outside", "none", "host"];

/** Where each runner's /24 is taken from (EPHEMERA_STEP_SUBNETS). */
export const DEFAULT_STEP_SUBNETS = "10.237.0.0/16";
/**
 * Always refused to steps, whatever EPHEMERA_STEP_DENY says: link-local, where clouds serve
 * instance metadata and credentials (169.254.169.254).
 */
export const LINK_LOCAL = "169.254.0.0/16";
/**
 * EPHEMERA_STEP_DENY's default: the private networks (RFC 1918) and carrier-grade NAT's
 * (RFC 6598), where the services a host reaches live (NATS, Redis, a cluster's API).
 */
export const DEFAULT_STEP_DENY = "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10";
/** A /24 per runner: .1 is the bridge, .2 on the steps' slots. */
export const MAX_SLOTS = 250;

/** The 8 hex characters that name a prefix's step networks. */
export const prefixTag = (prefix: string): string => createHash("sha256").update(prefix).digest("hex").slice(0, 8);

export interface NetworkNames {
  tag: string;
  pid: number;
  /** The runner's own (random), for two runners of one prefix in one process. */
  id: string;
  bridge: string;
  /** The bridge's alias: what finds it again after a crash. */
  alias: string;
  table: string;
  netns: (slot: number) => string;
  /** The host end of a slot's veth (the other end is eth0 in its namespace). */
  veth: (slot: number) => string;
}

/** Interface names have at most 15 characters: ephb/ephv, the id (6) and the slot (≤ 3). */
export function networkNames(prefix: string, pid: number, id: string): NetworkNames {
  const tag = prefixTag(prefix);
  return {
    tag, pid, id,
    bridge: `ephb${id}`,
    alias: `ephemera ${tag} ${pid} ${id}`,
    table: `ephemera_${tag}_${pid}_${id}`,
    netns: (slot) => `ephemera-${tag}-${pid}-${id}-${slot}`,
    veth: (slot) => `ephv${id}${slot}`,
  };
}

export interface ParsedName { tag: string; pid: number; id: string; forwarded: string[] }

/** A runner's tag, pid and id read back from a namespace, table or alias it named (the alias also says which uplinks it turned forwarding on for). */
export function parseNetworkName(name: string): ParsedName | undefined {
  const m = /^ephemera[-_ ]([0-9a-f]{8})[-_ ](\d+)[-_ ]([0-9a-f]{6})(?:-\d+| fwd=([\w.,-]+))?$/.exec(name);
  return m ? { tag: m[1]!, pid: Number(m[2]), id: m[3]!, forwarded: m[4]?.split(",") ?? [] } : undefined;
}

export interface Cidr { base: number; bits: number }

const IPV4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

export function parseIPv4(text: string): number | undefined {
  const m = IPV4.exec(text.trim());
  if (!m) return undefined;
  const octets = m.slice(1).map(Number);
  return octets.every((o) => o <= 255) ? octets.reduce((n, o) => n * 256 + o, 0) : undefined;
}

export const formatIPv4 = (n: number): string => [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join(".");

const mask = (bits: number) => (bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0);

export function parseCidr(text: string): Cidr | undefined {
  const [addr, bits, ...rest] = text.trim().split("/");
  const base = parseIPv4(addr ?? "");
  const n = Number(bits);
  if (base === undefined || rest.length || !/^\d+$/.test(bits ?? "") || n > 32) return undefined;
  return { base: (base & mask(n)) >>> 0, bits: n };
}

const overlaps = (a: Cidr, b: Cidr) => {
  const bits = Math.min(a.bits, b.bits);
  return ((a.base & mask(bits)) >>> 0) === ((b.base & mask(bits)) >>> 0);
};

/** EPHEMERA_STEP_SUBNETS: an IPv4 range of /8 to /24, whose /24s the runners take. */
export function stepSubnets(text: string): Cidr {
  const cidr = parseCidr(text);
  if (!cidr || cidr.bits < 8 || cidr.bits > 24) {
    throw new Error(`EPHEMERA_STEP_SUBNETS must be an IPv4 range of /8 to /24 such as ${DEFAULT_STEP_SUBNETS}, got "${text}"`);
  }
  return cidr;
}

/** EPHEMERA_STEP_DENY: IPv4 ranges (an address alone is a /32), comma- or space-separated; "none" for none. */
export function stepDeny(text: string): Cidr[] {
  if (text.trim() === "none") return [];
  const list = text.split(/[\s,]+/).filter(Boolean).map((t) => ({ t, cidr: parseCidr(t.includes("/") ? t : `${t}/32`) }));
  const bad = list.filter((c) => !c.cidr).map((c) => c.t);
  if (bad.length) {
    throw new Error('EPHEMERA_STEP_DENY must list IPv4 ranges such as 10.0.0.0/8 (comma-separated), or be "none"; ' +
      `not ranges: "${bad.join(", ")}"`);
  }
  return list.map((c) => c.cidr!);
}

/** Link-local and `deny`, without a range inside another (an nftables set refuses overlapping elements). */
export function deniedRanges(deny: Cidr[]): Cidr[] {
  const all = [parseCidr(LINK_LOCAL)!, ...deny];
  return all.filter((c, i) => !all.some((o, j) => o.bits <= c.bits && overlaps(o, c) && (o.bits < c.bits || j < i)));
}

/**
 * The /24 of `pool` to take: the first, from `start` on (wrapping), that overlaps no network
 * the host has (its addresses' and routes'); undefined when all are taken.
 */
export function pickSubnet(pool: Cidr, taken: Cidr[], start: number): Cidr | undefined {
  const count = 2 ** (24 - pool.bits);
  for (let i = 0; i < count; i++) {
    const candidate = { base: pool.base + ((start + i) % count) * 256, bits: 24 };
    if (!taken.some((t) => overlaps(t, candidate))) return candidate;
  }
  return undefined;
}

/**
 * The runner's table: the steps' traffic to the host itself is refused (every address of
 * it, on any interface), and to the denied ranges (link-local and EPHEMERA_STEP_DENY's) but
 * DNS to the steps' resolvers; new connections into the steps from anywhere are dropped, the
 * steps' own go out, masqueraded. Deleting the table removes all of it.
 */
export function nftRuleset(names: NetworkNames, subnet: Cidr, deny: Cidr[], resolvers: string[]): string {
  const br = JSON.stringify(names.bridge);
  const set = (items: string[]) => `{ ${items.join(", ")} }`;
  // A resolver in a denied range (a VPC's, the cloud's at 169.254.169.253) still answers the steps' DNS, and nothing else.
  const dns = resolvers.length ? `\n    iifname ${br} ip daddr ${set(resolvers)} meta l4proto { tcp, udp } th dport 53 accept` : "";
  const denied = set(deniedRanges(deny).map((c) => `${formatIPv4(c.base)}/${c.bits}`));
  return `table inet ${names.table} {
  chain input {
    type filter hook input priority filter; policy accept;
    iifname ${br} reject with icmpx type admin-prohibited
  }
  chain forward {
    type filter hook forward priority filter; policy accept;
    oifname ${br} ct state established,related accept
    oifname ${br} drop${dns}
    iifname ${br} ip daddr ${denied} reject with icmpx type admin-prohibited
    iifname ${br} accept
  }
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr ${formatIPv4(subnet.base)}/24 oifname != ${br} masquerade
  }
}
`;
}

/** `ip -batch` lines that make the bridge and the slots' veths (the namespaces are addressed apart). */
export function ipSetupBatch(names: NetworkNames, subnet: Cidr, slots: number, forwarded: string[]): string {
  const lines = [
    `link add ${names.bridge} type bridge`,
    // The uplinks this runner turned forwarding on for: whoever removes its leftovers turns it off again.
    `link set ${names.bridge} alias "${names.alias}${forwarded.length ? ` fwd=${forwarded.join(",")}` : ""}"`,
    `addr add ${formatIPv4(subnet.base + 1)}/24 dev ${names.bridge}`,
    `link set ${names.bridge} up`,
  ];
  for (let i = 0; i < slots; i++) {
    lines.push(
      `netns add ${names.netns(i)}`,
      `link add ${names.veth(i)} type veth peer name eth0 netns ${names.netns(i)}`,
      `link set ${names.veth(i)} master ${names.bridge}`,
      // Steps do not reach each other over the bridge either.
      `link set ${names.veth(i)} type bridge_slave isolated on`,
      `link set ${names.veth(i)} up`,
    );
  }
  return lines.join("\n") + "\n";
}

/** `ip -n NETNS -batch` lines for a slot: its address, loopback, the route out through the bridge. */
export function slotBatch(subnet: Cidr, slot: number): string {
  return [
    `addr add ${formatIPv4(subnet.base + 2 + slot)}/24 dev eth0`,
    "link set lo up",
    "link set eth0 up",
    `route add default via ${formatIPv4(subnet.base + 1)}`,
  ].join("\n") + "\n";
}

export interface StepResolvers {
  /** The steps' /etc/resolv.conf. */
  text: string;
  nameservers: string[];
  /** Where they came from, for the log. */
  source: string;
}

const nameservers = (text: string) =>
  text.split("\n").map((l) => /^\s*nameserver\s+(\S+)/.exec(l)?.[1]).filter((n): n is string => !!n);

/** A step reaches IPv4 addresses off the host only: not loopback (its own), not IPv6 (it has none). */
const reachable = (ns: string) => parseIPv4(ns) !== undefined && !ns.startsWith("127.");

/**
 * The steps' resolvers: EPHEMERA_STEP_DNS, else the host's that a step can reach, else those
 * of systemd-resolved behind a loopback stub (its upstreams). search/options lines are kept.
 */
export function stepResolvers(host: string, upstream: string | undefined, configured: string[] | undefined): StepResolvers {
  const rest = host.split("\n").filter((l) => /^\s*(search|domain|options)\s/.test(l));
  const found = configured?.length
    ? { nameservers: configured, source: "EPHEMERA_STEP_DNS" }
    : nameservers(host).some(reachable)
      ? { nameservers: nameservers(host).filter(reachable), source: "/etc/resolv.conf" }
      : { nameservers: nameservers(upstream ?? "").filter(reachable), source: "systemd-resolved's upstream servers" };
  return { ...found, text: [...found.nameservers.map((n) => `nameserver ${n}`), ...rest].join("\n") + "\n" };
}

/** EPHEMERA_STEP_DNS: IPv4 addresses, comma- or space-separated. */
export function stepDns(text: string | undefined): string[] | undefined {
  if (!text?.trim()) return undefined;
  const list = text.split(/[\s,]+/).filter(Boolean);
  const bad = list.filter((a) => !reachable(a));
  if (bad.length) throw new Error(`EPHEMERA_STEP_DNS must list IPv4 addresses a step can reach (not loopback), got "${bad.join(", ")}"`);
  return list;
}
