// A process-driver step's network, never the host's (EPHEMERA_STEP_NETWORK):
// - outside (default): at start the runner makes a bridge with a /24 of its own, a pool of
//   network namespaces (one per step slot, each with a veth on the bridge) and one nftables
//   table (the host, link-local and EPHEMERA_STEP_DENY's ranges refused to the steps, their
//   traffic out masqueraded). A step joins a free namespace (ephemera-launch --netns: one
//   setns, no process per step). Only with a pid namespace: without, a step's processes
//   could outlive it in a namespace the next step is given.
// - none: a new, empty namespace per step (ephemera-launch --newnet): loopback only.
// - host: the runner's own network, chosen knowingly.
// What cannot be had here falls back (outside → none → host), said in one log line.
import { execFile, spawn } from "node:child_process";
import { randomBytes, randomInt } from "node:crypto";
import { readFile, readdir, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { errorMessage, type Logger } from "@ephemera/kit";
import type { Isolation } from "./isolation.js";
import {
  DEFAULT_STEP_DENY, MAX_SLOTS, deniedRanges, formatIPv4, ipSetupBatch, networkNames, nftRuleset, parseCidr, parseNetworkName, pickSubnet, slotBatch,
  stepDeny, stepResolvers,
  type Cidr, type NetworkNames, type StepNetworkMode,
} from "./network-plan.js";

const run = promisify(execFile);
const NETNS_DIR = "/run/netns";
const COMMAND_TIMEOUT_MS = 10_000;

export interface StepNetworkLease {
  /** The launcher's network flags for this step. */
  args: string[];
  release(): void;
}

export interface StepNetwork {
  /** What the steps actually get (after any fallback). */
  readonly mode: StepNetworkMode;
  /**
   * A step's network; with a pool, waits for a free slot. Rejects when `signal` aborts while
   * it waits (the slot goes to the next), and when the network is closed.
   */
  acquire(signal?: AbortSignal): Promise<StepNetworkLease>;
  /** Removes what the runner made (graceful stop). */
  close(): Promise<void>;
}

export interface StepNetworkOptions {
  mode: StepNetworkMode;
  prefix: string;
  /** The steps' resolv.conf is written here. */
  workdir: string;
  /** Steps at once: the pool's size. */
  slots: number;
  isolation: Isolation;
  subnets: Cidr;
  /** EPHEMERA_STEP_DNS. */
  dns?: string[];
  /** EPHEMERA_STEP_DENY (absent: its default); link-local is refused whatever it says. */
  deny?: Cidr[];
  logger: Logger;
  /** The runner's pid (names carry it); a test passes another. */
  pid?: number;
}

export class StepNetworkClosedError extends Error {
  override readonly name = "StepNetworkClosedError";
  constructor() { super("the step network is closed"); }
}

const fixed = (mode: StepNetworkMode, args: string[]): StepNetwork => ({
  mode, acquire: async () => ({ args, release: () => undefined }), close: async () => undefined,
});

export async function openStepNetwork(o: StepNetworkOptions): Promise<StepNetwork> {
  const { logger } = o;
  if (o.mode === "host") {
    logger.warn("steps share the runner's network (EPHEMERA_STEP_NETWORK=host): a step reaches NATS, Redis, the IO context, " +
      "the API and everything else listening on this machine");
    return fixed("host", []);
  }
  if (!o.isolation.netNamespace) {
    logger.warn({ why: o.isolation.netNamespaceError }, `steps share the runner's network (as EPHEMERA_STEP_NETWORK=host), not ${o.mode}: ` +
      `no network namespace can be made here (${o.isolation.netNamespaceError ?? "unknown"}); a step reaches every service of this machine`);
    return fixed("host", []);
  }
  const inherited = process.getuid?.() === 0 ? await removeLeftovers(o.prefix, logger) : [];
  if (o.mode === "none") {
    await restoreUplinks(inherited, logger);
    logger.info("steps get a network of their own with loopback only (EPHEMERA_STEP_NETWORK=none)");
    return fixed("none", ["--newnet"]);
  }
  if (!o.isolation.pidNamespace) {
    // A pooled namespace goes to the next step as it is: a process of this one that escaped its group would be in it still.
    await restoreUplinks(inherited, logger);
    logger.warn("steps get loopback only (as EPHEMERA_STEP_NETWORK=none), not outside: without a pid namespace a step's " +
      "processes can outlive it, and a namespace of the pool would be shared with the next step");
    return fixed("none", ["--newnet"]);
  }
  try {
    const pool = await NatPool.open(o, inherited);
    const { subnet, names, dns, denied } = pool;
    logger.info({ subnet, bridge: names.bridge, slots: o.slots, dns: dns.nameservers, dnsFrom: dns.source, denied },
      "steps get a network of their own, out through this machine's NAT (EPHEMERA_STEP_NETWORK=outside)");
    if (!pool.dns.nameservers.length) logger.warn("steps have no DNS resolver they can reach: set EPHEMERA_STEP_DNS");
    return pool;
  } catch (err) {
    await restoreUplinks(inherited, logger);
    logger.warn({ err: errorMessage(err) }, "steps get loopback only (as EPHEMERA_STEP_NETWORK=none), not outside: " +
      `the NAT to the outside cannot be set up here (${errorMessage(err)})`);
    return fixed("none", ["--newnet"]);
  }
}

/** The pool of namespaces behind the runner's bridge. */
class NatPool implements StepNetwork {
  readonly mode = "outside";
  private readonly free: number[];
  private readonly waiting: Array<{ resolve: (slot: number) => void; reject: (err: Error) => void }> = [];
  private closed?: Promise<void>;

  private constructor(
    readonly names: NetworkNames, readonly subnet: string, readonly dns: { nameservers: string[]; source: string },
    /** Link-local and EPHEMERA_STEP_DENY's ranges, as refused. */
    readonly denied: string[],
    private readonly resolvFile: string, slots: number, private readonly forwarded: string[], private readonly logger: Logger,
  ) {
    this.free = Array.from({ length: slots }, (_, i) => i);
  }

  /** `inherited`: uplinks a dead runner of the prefix turned forwarding on for, now this one's to turn off. */
  static async open(o: StepNetworkOptions, inherited: string[]): Promise<NatPool> {
    if (process.getuid?.() !== 0) throw new Error("it needs the runner to run as root");
    if (o.slots > MAX_SLOTS) throw new Error(`at most ${MAX_SLOTS} steps at once have a slot (EPHEMERA_RUNNER_CONCURRENCY is ${o.slots})`);
    const resolvers = stepResolvers(
      await readFile("/etc/resolv.conf", "utf8").catch(() => ""),
      await readFile("/run/systemd/resolve/resolv.conf", "utf8").catch(() => undefined), o.dns,
    );
    const deny = o.deny ?? stepDeny(DEFAULT_STEP_DENY);
    const resolvFile = join(o.workdir, "resolv.conf");
    await writeFile(`${resolvFile}.tmp`, resolvers.text, { mode: 0o644 });
    await rename(`${resolvFile}.tmp`, resolvFile);
    // Another runner may take the same /24 at the same moment: it is checked after, and taken again.
    for (let attempt = 0; ; attempt++) {
      const names = networkNames(o.prefix, o.pid ?? process.pid, randomBytes(3).toString("hex"));
      const subnet = pickSubnet(o.subnets, await hostNetworks(), randomInt(2 ** (24 - o.subnets.bits)));
      if (!subnet) throw new Error(`every /24 of EPHEMERA_STEP_SUBNETS (${cidrText(o.subnets)}) is in use on this machine`);
      const forwarded = [...new Set([...inherited, ...await forwardUplinks()])];
      try {
        await build(names, subnet, o.slots, forwarded, deny, resolvers.nameservers);
      } catch (err) {
        await teardown(names);
        await restoreUplinks(forwarded, o.logger);
        throw err;
      }
      const clash = (await hostNetworks(names.bridge)).some((n) => n.base === subnet.base && n.bits <= 24);
      if (!clash) return new NatPool(names, cidrText(subnet), resolvers, deniedRanges(deny).map(cidrText), resolvFile, o.slots, forwarded, o.logger);
      await teardown(names);
      await restoreUplinks(forwarded, o.logger);
      if (attempt === 4) throw new Error(`no free /24 of ${cidrText(o.subnets)} after ${attempt + 1} tries`);
    }
  }

  async acquire(signal?: AbortSignal): Promise<StepNetworkLease> {
    if (this.closed) throw new StepNetworkClosedError();
    const slot = this.free.pop() ?? (await this.nextFree(signal));
    let released = false;
    return {
      args: ["--netns", join(NETNS_DIR, this.names.netns(slot)), "--resolv", this.resolvFile],
      release: () => {
        if (released) return;
        released = true;
        const next = this.waiting.shift();
        if (next) next.resolve(slot);
        else this.free.push(slot);
      },
    };
  }

  /** The slot a step gives back next; rejects when `signal` aborts first. */
  private nextFree(signal?: AbortSignal): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      const abort = () => {
        this.waiting.splice(this.waiting.indexOf(waiter), 1);
        reject(new Error("stopped while waiting for a step network"));
      };
      const waiter = {
        resolve: (slot: number) => { signal?.removeEventListener("abort", abort); resolve(slot); },
        reject: (err: Error) => { signal?.removeEventListener("abort", abort); reject(err); },
      };
      if (signal?.aborted) return reject(new Error("stopped while waiting for a step network"));
      signal?.addEventListener("abort", abort, { once: true });
      this.waiting.push(waiter);
    });
  }

  close(): Promise<void> {
    return (this.closed ??= (async () => {
      for (const waiter of this.waiting.splice(0)) waiter.reject(new StepNetworkClosedError());
      await teardown(this.names);
      await restoreUplinks(this.forwarded, this.logger);
    })());
  }
}

async function build(names: NetworkNames, subnet: Cidr, slots: number, forwarded: string[], deny: Cidr[], resolvers: string[]): Promise<void> {
  await ipBatch([], ipSetupBatch(names, subnet, slots, forwarded));
  await Promise.all([
    acceptInIptablesForward(names),
    ...Array.from({ length: slots }, (_, i) => ipBatch(["-n", names.netns(i)], slotBatch(subnet, i))),
    // Forwarded from the bridge (the steps' traffic out); per interface, not the whole host.
    writeFile(`/proc/sys/net/ipv4/conf/${names.bridge}/forwarding`, "1"),
    nft(nftRuleset(names, subnet, deny, resolvers)),
  ]);
}

/** Everything a runner of these names made; what is already gone is skipped. */
async function teardown(names: Pick<NetworkNames, "bridge" | "table" | "tag" | "pid" | "id">): Promise<void> {
  const netns = (await readdir(NETNS_DIR).catch(() => [] as string[]))
    .filter((n) => n.startsWith(`ephemera-${names.tag}-${names.pid}-${names.id}-`));
  const links = (await linkList()).map((l) => l.ifname).filter((n) => n === names.bridge || n.startsWith(`ephv${names.id}`));
  // Links first: deleting a veth takes its peer at once; a namespace's own go only later, asynchronously.
  const lines = [...links.map((l) => `link del ${l}`), ...netns.map((n) => `netns del ${n}`)];
  if (lines.length) await ipBatch(["-force"], lines.join("\n") + "\n").catch(() => undefined);
  await run("nft", ["delete", "table", "inet", names.table], { timeout: COMMAND_TIMEOUT_MS }).catch(() => undefined);
  await removeFromIptablesForward(names.bridge);
}

/**
 * A packet is forwarded only if every forward hook accepts it, and iptables' FORWARD chain
 * may drop what this runner's table lets out: Docker sets its policy to DROP. Where that
 * chain exists, the bridge's traffic out (and the replies in) are accepted there too, first.
 */
async function acceptInIptablesForward(names: NetworkNames): Promise<void> {
  const rules = await iptablesForward();
  if (rules === undefined || (rules.length === 1 && rules[0] === "-P FORWARD ACCEPT")) return;
  const { bridge, alias } = names;
  for (const rule of [["-i", bridge], ["-o", bridge, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED"]]) {
    await run("iptables", ["-w", "-I", "FORWARD", ...rule, "-m", "comment", "--comment", alias, "-j", "ACCEPT"], { timeout: COMMAND_TIMEOUT_MS });
  }
}

async function removeFromIptablesForward(bridge: string): Promise<void> {
  const ours = (await iptablesForward() ?? []).filter((r) => r.startsWith("-A FORWARD ") && new RegExp(`-[io] ${bridge}( |$)`).test(r));
  for (const rule of ours) {
    // -S quotes the comment ("ephemera <tag> <pid> <id>"): split outside the quotes.
    const argv = [...rule.slice(3).matchAll(/"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2]!);
    await run("iptables", ["-w", "-D", ...argv], { timeout: COMMAND_TIMEOUT_MS }).catch(() => undefined);
  }
}

/** `iptables -S FORWARD`, a rule a line; undefined where there is no iptables. */
const iptablesForward = (): Promise<string[] | undefined> =>
  run("iptables", ["-w", "-S", "FORWARD"], { timeout: COMMAND_TIMEOUT_MS }).then((r) => r.stdout.split("\n").filter(Boolean), () => undefined);

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
};

/**
 * A killed runner's namespaces, bridge and table of this prefix: removed before new ones are
 * made. Returns the uplinks it had turned forwarding on for.
 */
async function removeLeftovers(prefix: string, logger: Logger): Promise<string[]> {
  const tag = networkNames(prefix, 0, "000000").tag;
  const tables = await run("nft", ["list", "tables"], { timeout: COMMAND_TIMEOUT_MS }).then((r) => r.stdout, () => "");
  const named = [
    ...(await readdir(NETNS_DIR).catch(() => [] as string[])),
    ...tables.split("\n").map((l) => l.split(" ")[2] ?? ""),
    ...(await linkList()).map((l) => l.ifalias ?? ""),
  ].map(parseNetworkName).filter((n): n is NonNullable<typeof n> => !!n && n.tag === tag && n.pid !== process.pid && !alive(n.pid));
  const dead = new Map(named.map((n) => [`${n.pid}-${n.id}`, n]));
  for (const n of dead.values()) {
    const names = networkNames(prefix, n.pid, n.id);
    await teardown(names);
    logger.info({ pid: n.pid, bridge: names.bridge }, "removed the step network a stopped runner left");
  }
  return [...new Set(named.flatMap((n) => n.forwarded))];
}

interface Link { ifname: string; ifalias?: string }

const linkList = async (): Promise<Link[]> =>
  run("ip", ["-j", "link", "show"], { timeout: COMMAND_TIMEOUT_MS }).then((r) => JSON.parse(r.stdout) as Link[], () => []);

interface AddrInfo { ifname: string; addr_info?: Array<{ local: string; prefixlen: number }> }

/** The IPv4 networks of the host's addresses and routes (but those of `except`). */
async function hostNetworks(except?: string): Promise<Cidr[]> {
  const [addrs, routes] = await Promise.all([
    run("ip", ["-j", "-4", "addr", "show"], { timeout: COMMAND_TIMEOUT_MS }).then((r) => JSON.parse(r.stdout) as AddrInfo[]),
    run("ip", ["-j", "-4", "route", "show"], { timeout: COMMAND_TIMEOUT_MS }).then((r) => JSON.parse(r.stdout) as Array<{ dst: string; dev?: string }>),
  ]);
  return [
    ...addrs.filter((a) => a.ifname !== except).flatMap((a) => (a.addr_info ?? []).map((i) => parseCidr(`${i.local}/${i.prefixlen}`))),
    ...routes.filter((r) => r.dst !== "default" && r.dev !== except).map((r) => parseCidr(r.dst.includes("/") ? r.dst : `${r.dst}/32`)),
  ].filter((c): c is Cidr => !!c);
}

/**
 * Replies to the steps come in on the host's uplinks (its default routes' interfaces), and
 * are forwarded only where forwarding is on. Turned on there when off, and off again by the
 * last runner to stop (a runner's bridge alias names the uplinks it counts as turned on).
 */
async function forwardUplinks(): Promise<string[]> {
  if ((await readFile("/proc/sys/net/ipv4/ip_forward", "utf8")).trim() === "1") return [];
  const routes = await run("ip", ["-j", "-4", "route", "show", "default"], { timeout: COMMAND_TIMEOUT_MS })
    .then((r) => JSON.parse(r.stdout) as Array<{ dev?: string }>);
  // On because another runner turned it on: this one turns it off too, if it is the last to stop.
  const byRunners = new Set((await linkList()).flatMap((l) => parseNetworkName(l.ifalias ?? "")?.forwarded ?? []));
  const turned: string[] = [];
  for (const dev of new Set(routes.flatMap((r) => (r.dev ? [r.dev] : [])))) {
    const file = `/proc/sys/net/ipv4/conf/${dev}/forwarding`;
    if ((await readFile(file, "utf8")).trim() === "1") {
      if (byRunners.has(dev)) turned.push(dev);
      continue;
    }
    await writeFile(file, "1");
    turned.push(dev);
  }
  return turned;
}

async function restoreUplinks(devs: string[], logger: Logger): Promise<void> {
  if (!devs.length) return;
  if ((await linkList()).some((l) => l.ifalias?.startsWith("ephemera "))) return;
  for (const dev of devs) {
    await writeFile(`/proc/sys/net/ipv4/conf/${dev}/forwarding`, "0").catch((err: unknown) =>
      logger.warn({ dev, err: errorMessage(err) }, "cannot turn forwarding off again"));
  }
}

async function ipBatch(options: string[], lines: string): Promise<void> {
  await piped("ip", [...options, "-batch", "-"], lines);
}

const nft = (ruleset: string) => piped("nft", ["-f", "-"], ruleset);

/** Runs a command with `input` on its stdin; its stderr names what failed. */
function piped(command: string, args: string[], input: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ["pipe", "ignore", "pipe"], timeout: COMMAND_TIMEOUT_MS });
    let stderr = "";
    child.stderr.on("data", (c: Buffer) => { stderr += c.toString(); });
    child.once("error", (err) => reject(new Error(`${command}: ${err.message}`)));
    child.once("close", (code) => (code === 0 ? resolve() : reject(new Error(`${command} ${args.join(" ")}: ${stderr.trim() || `exit ${code}`}`))));
    child.stdin.end(input);
  });
}

const cidrText = (c: Cidr) => `${formatIPv4(c.base)}/${c.bits}`;
