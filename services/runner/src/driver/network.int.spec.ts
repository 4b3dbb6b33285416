// A process-driver step's network is its own: a real runner (the process driver, as root)
// against this machine's NATS and Redis. From inside a step nothing of the host answers
// (NATS, Redis, the IO context, a server the test listens with on every host address), its
// inputs and outputs still work, an "outside" host (a namespace the test makes) is reached
// through the NAT while hosts in private and link-local ranges are not, loopback is the step's
// own, a step stopped while it waits for a namespace never starts, and the runner leaves
// nothing behind.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { createHash, randomInt } from "node:crypto";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { networkInterfaces, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import * as pb from "@ephemera/proto";
import { Aggregates, decode, dispatchCodec, encode, ev, runId as makeRunId, workflowId, type DomainEvent, journaledValues } from "@ephemera/events";
import {
  connectNats, InMemoryClaimStore, JetStreamEventStore, JetStreamLogStore, JetStreamValueStore, JetStreamWorkQueue, type EventStore, type WorkQueue,
} from "@ephemera/eventstore";
import { createLogger, errorMessage, stepGrants, waitFor } from "@ephemera/kit";
import { openRedis, start as startIOContext, type Redis, type RunningIOContext } from "@ephemera/iocontext";
import { start, type RunningRunner } from "../index.js";
import type { RunnerConfig } from "../config.js";
import { Runner } from "../runner.js";
import { detectIsolation, type Isolation } from "./isolation.js";
import { openStepNetwork } from "./network.js";
import { DEFAULT_STEP_SUBNETS, formatIPv4, parseCidr, pickSubnet, stepSubnets, type Cidr } from "./network-plan.js";
import { ProcessDriver } from "./process.js";
import { testNats } from "../../../../test/support/servers.js";
import { TEST_KEY, TEST_KEY_SECRET } from "../../../../test/support/keys.js";

type NatsConnection = Awaited<ReturnType<typeof connectNats>>;

const ROOT = resolve(__dirname, "..", "..", "..", "..");
const LAUNCHER = join(ROOT, "services/runner/dist/ephemera-launch");
const LOOP_PORT = 7070;

const step = (name: string, script: string, inputs: string[], outputs: Array<[string, string]>) => ({
  name, script, inputs: inputs.map((n) => ({ name: n, valueFromSandbox: true })) as pb.StepInput[],
  outputs: outputs.map(([n, valueFromPath]) => ({ name: n, valueFromPath })),
});

const spec = pb.ResourcePluginSpec.fromPartial({
  create: [
    // What answers from inside the step, one target a line; and an input passed on as an output.
    step("reach", `#!/usr/bin/env bash
for t in $TARGETS; do
  if timeout 3 bash -c "exec 3<>/dev/tcp/\${t%:*}/\${t##*:}" 2>/dev/null; then echo "$t open"; else echo "$t closed"; fi
done > /tmp/report
printf '%s' "$GREETING" > /tmp/echo
`, ["targets", "greeting"], [["report", "/tmp/report"], ["echo", "/tmp/echo"]]),
    step("outside", `#!/usr/bin/env bash
set -eo pipefail
exec 3<>/dev/tcp/\${OUTSIDE%:*}/\${OUTSIDE##*:}
head -1 <&3 > /tmp/reply
`, ["outside"], [["reply", "/tmp/reply"]]),
    // Listens on loopback, waits until the other step has bound the same port, then talks to itself.
    step("loop", `#!/usr/bin/env node
const fs = require("node:fs");
const net = require("node:net");
const me = process.env.EPHEMERA_ROUTING_KEY;
setTimeout(() => { fs.writeFileSync("/tmp/reply", "the other step never bound"); process.exit(0); }, 20000).unref();
const server = net.createServer((s) => s.end("own " + me));
server.on("error", (e) => { fs.writeFileSync("/tmp/reply", "cannot listen: " + e.code); process.exit(0); });
server.listen(${LOOP_PORT}, "127.0.0.1", () => {
  fs.writeFileSync(process.env.SCRATCH + "/" + me + ".bound", "");
  const wait = () => fs.existsSync(process.env.SCRATCH + "/" + process.env.OTHER + ".bound") ? talk() : setTimeout(wait, 20);
  wait();
});
function talk() {
  let got = "";
  net.connect(${LOOP_PORT}, "127.0.0.1").on("data", (c) => { got += c; }).on("end", () => {
    fs.writeFileSync("/tmp/reply", got);
    process.exit(0);
  });
}
`, ["scratch", "other"], [["reply", "/tmp/reply"]]),
    // Says it started, then holds its namespace until the test lets it go.
    step("hold", `#!/bin/sh
: > "$SCRATCH/$EPHEMERA_ROUTING_KEY.started"
while [ ! -e "$SCRATCH/go" ]; do sleep 0.05; done
`, ["scratch"], []),
  ],
});

/** The tag ephemera's names of a prefix's step networks carry (namespaces, tables, bridge aliases). */
const prefixTag = (prefix: string) => createHash("sha256").update(prefix).digest("hex").slice(0, 8);

/** Every namespace, nftables table, interface (by name or alias) and iptables FORWARD rule that carries the prefix's tag. */
function networkThingsOf(prefix: string): string[] {
  const tag = prefixTag(prefix);
  const netns = execFileSync("ip", ["netns", "list"], { encoding: "utf8" }).split("\n").map((l) => l.split(" ")[0]!).filter(Boolean);
  const tables = execFileSync("nft", ["list", "tables"], { encoding: "utf8" }).split("\n").filter(Boolean);
  const links = (JSON.parse(execFileSync("ip", ["-j", "-d", "link", "show"], { encoding: "utf8" })) as Array<{ ifname: string; ifalias?: string }>)
    .map((l) => `link ${l.ifname} ${l.ifalias ?? ""}`);
  const forward = execFileSync("iptables", ["-w", "-S", "FORWARD"], { encoding: "utf8" }).split("\n").map((r) => `iptables ${r}`);
  return [...netns.map((n) => `netns ${n}`), ...tables, ...links, ...forward].filter((t) => t.includes(tag));
}

/** Whatever of the prefix is still there when a test failed half-way: the host is left as it was. */
function removeNetworkThings(prefix: string): void {
  for (const thing of networkThingsOf(prefix)) {
    const [kind, a, b] = thing.split(" ");
    if (kind === "iptables") continue; // goes with its bridge's runner; listed so that a leftover fails the test
    const argv = kind === "netns" ? ["ip", "netns", "del", a!] : kind === "table" ? ["nft", "delete", "table", a!, b!] : ["ip", "link", "del", a!];
    try { execFileSync(argv[0]!, argv.slice(1), { stdio: "ignore" }); } catch { /* gone with another */ }
  }
}

/** IPv4 forwarding of the host and of each of its interfaces (but those the tests and runners make). */
const forwarding = () => Object.fromEntries(readdirSync("/proc/sys/net/ipv4/conf").filter((d) => !d.startsWith("eph"))
  .map((d) => [d, readFileSync(`/proc/sys/net/ipv4/conf/${d}/forwarding`, "utf8").trim()]));

/** The host's own IPv4 addresses, loopback and every interface's (eth0, bridges, veths). */
const hostAddresses = () => [...new Set(Object.values(networkInterfaces()).flat()
  .flatMap((a) => (a && a.family === "IPv4" ? [a.address] : [])))];

/**
 * A /24 of `pool` (its first three octets) that overlaps none of this machine's addresses and
 * routes, nor the steps' subnets: a test's host there collides with nothing of the machine.
 */
function freeNet(pool: string): string {
  const json = <T>(...args: string[]) => JSON.parse(execFileSync("ip", ["-j", "-4", ...args], { encoding: "utf8" })) as T[];
  const taken = [
    ...json<{ addr_info?: Array<{ local: string; prefixlen: number }> }>("addr", "show")
      .flatMap((a) => (a.addr_info ?? []).map((i) => `${i.local}/${i.prefixlen}`)),
    ...json<{ dst: string }>("route", "show", "table", "all").map((r) => (r.dst.includes("/") ? r.dst : `${r.dst}/32`)),
    DEFAULT_STEP_SUBNETS,
  ].map((c) => parseCidr(c)).filter((c): c is Cidr => !!c);
  const free = pickSubnet(parseCidr(pool)!, taken, randomInt(256));
  if (!free) throw new Error(`no /24 of ${pool} is free on this machine`);
  return formatIPv4(free.base).split(".").slice(0, 3).join(".");
}

/**
 * A host of the "outside world": a namespace of the test's own, a veth to the host (a /30 of
 * `net`); by default in 198.18.0.0/15 (benchmarking), which no step is refused.
 */
class OutsideHost {
  readonly ns = `ephtest-out-${process.pid}-${randomInt(1e6)}`;
  readonly link = `ephto${randomInt(1e8)}`;
  port = 0;
  private server?: ChildProcess;

  constructor(readonly net = `198.18.${randomInt(256)}`) {}

  get address(): string { return `${this.net}.2`; }
  get hostSide(): string { return `${this.net}.1`; }

  /** Its server answers on each port; the first is `port`. */
  async start(...ports: number[]): Promise<void> {
    this.port = ports[0]!;
    const ip = (...args: string[]) => execFileSync("ip", args);
    ip("netns", "add", this.ns);
    ip("link", "add", this.link, "type", "veth", "peer", "name", "eth0", "netns", this.ns);
    ip("addr", "add", `${this.hostSide}/30`, "dev", this.link);
    ip("link", "set", this.link, "up");
    // Replies to the steps come in here and are forwarded to their bridge.
    execFileSync("sysctl", ["-q", "-w", `net.ipv4.conf.${this.link}.forwarding=1`]);
    ip("-n", this.ns, "addr", "add", `${this.address}/30`, "dev", "eth0");
    ip("-n", this.ns, "link", "set", "eth0", "up");
    ip("-n", this.ns, "link", "set", "lo", "up");
    const server = spawn("ip", ["netns", "exec", this.ns, process.execPath, "-e",
      `for (const port of ${JSON.stringify(ports)}) require("node:net")` +
      // A client gone before the reply (a probe that only connects) must not end the server.
      `.createServer((s) => s.on("error", () => {}).end("outside saw " + s.remoteAddress + "\\n"))` +
      `.listen(port, "${this.address}", () => console.log("listening"))`], { stdio: ["ignore", "pipe", "inherit"] });
    this.server = server;
    let said = "";
    server.stdout!.on("data", (c: Buffer) => { said += c.toString(); });
    await waitFor(() => said.split("listening").length > ports.length, { timeoutMs: 10_000, what: `the server of ${this.address}` });
  }

  stop(): void {
    this.server?.kill("SIGKILL");
    for (const args of [["link", "del", this.link], ["netns", "del", this.ns]]) {
      try { execFileSync("ip", args, { stdio: "ignore" }); } catch { /* not made */ }
    }
  }
}

describe("a process-driver step's network (root: namespaces, a bridge, nftables)", () => {
  let nc: NatsConnection;
  let store: EventStore;
  let values: JetStreamValueStore;
  let queue: WorkQueue<pb.StepDispatch>;
  let redis: Redis;
  let prefix: string;
  let cleanupStreams: (nc: NatsConnection) => Promise<void>;
  let io: RunningIOContext;
  let scratchDir: string;
  let workdir: string;
  let hostServer: Server;
  let hostPort: number;
  const runners: RunningRunner[] = [];
  const outside = new OutsideHost();
  // Out there too, but in ranges a step is refused: a private network's (RFC 1918) and link-local (the cloud's metadata service).
  const privateHost = new OutsideHost(freeNet("192.168.0.0/16"));
  const linkLocalHost = new OutsideHost(freeNet("169.254.0.0/16"));
  const logger = createLogger("test", "silent");

  beforeAll(async () => {
    // A test below kills a runner started as a process: it must match the sources.
    execFileSync(process.execPath, [require.resolve("typescript/bin/tsc"), "-b", join(ROOT, "services/runner")], { stdio: "inherit" });
    // On every address of the host, as a careless service would listen.
    hostServer = createServer((s) => s.on("error", () => undefined).end("host\n"));
    await new Promise<void>((r) => hostServer.listen(0, "0.0.0.0", r));
    hostPort = (hostServer.address() as { port: number }).port;
    const port = 9000 + randomInt(1000);
    await outside.start(port);
    // Port 53 as well: the steps' resolver, when EPHEMERA_STEP_DNS names it.
    await privateHost.start(port, 53);
    await linkLocalHost.start(port);
  }, 120_000);

  afterAll(async () => {
    for (const h of [outside, privateHost, linkLocalHost]) h.stop();
    await new Promise((r) => hostServer.close(r));
  });

  beforeEach(async () => {
    const t = testNats("net");
    prefix = t.prefix;
    cleanupStreams = t.cleanup;
    nc = await connectNats(t.url, "network-test");
    store = await JetStreamEventStore.open(nc, { prefix });
    values = await JetStreamValueStore.open(nc, prefix);
    queue = await JetStreamWorkQueue.open(nc, prefix, dispatchCodec);
    redis = openRedis(process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379");
    scratchDir = await mkdtemp(join("/var/tmp", `${prefix}-scratch-`));
    await chmod(scratchDir, 0o1777); // the scripts run as nobody
    workdir = await mkdtemp(join(tmpdir(), `${prefix}-work-`));
    io = await startIOContext({ listen: "127.0.0.1:0", prefix, keys: [TEST_KEY] }, { store, redis, values, logger });
    await append(Aggregates.plugin, "net", ev("ephemera.plugin.published.v1", { name: "net", version: "1.0.0", spec }));
  });

  afterEach(async () => {
    for (const r of runners.splice(0)) await r.stop();
    removeNetworkThings(prefix);
    await io.stop();
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length) await redis.del(...keys);
    await redis.quit();
    await cleanupStreams(nc);
    await nc.close();
    await rm(scratchDir, { recursive: true, force: true });
    await rm(workdir, { recursive: true, force: true });
  });

  const startRunner = async (stepNetwork?: RunnerConfig["stepNetwork"], more: Partial<RunnerConfig> = {}) => {
    const runner = await start({
      natsUrl: "", prefix, cluster: "local", concurrency: 4, driver: "process", iocontextAddr: `127.0.0.1:${io.port}`,
      workdir, listen: "127.0.0.1:0", runnerId: "net-runner", launcher: LAUNCHER, hostEnv: { PATH: process.env["PATH"] ?? "/usr/bin:/bin" },
      // As nobody; the host stays writable so that two steps can meet in the scratch directory.
      stepSandbox: { uid: 65534, gid: 65534, tmpSizeBytes: 16 * 1024 * 1024 },
      cancelGraceMs: 1000, shutdownGraceMs: 1000, ...(stepNetwork ? { stepNetwork } : {}), ...more,
    }, { store, queue, logs: await JetStreamLogStore.open(nc, prefix), claims: new InMemoryClaimStore(), logger, signingKey: TEST_KEY, values });
    runners.push(runner);
    return runner;
  };

  const append = async (aggregate: string, id: string, ...events: DomainEvent[]) => {
    const current = await store.read(aggregate, id);
    await store.append(aggregate, id, current, events.map(encode), { source: "test" });
  };

  const dispatch = async (routingKey: string, stepName: string, params: Record<string, string>) => {
    const wf = workflowId(routingKey, "db", "create");
    const id = makeRunId(wf, stepName, 1);
    const d = pb.StepDispatch.fromPartial({
      runId: id, workflowId: wf, sandbox: `sb-${routingKey}`, routingKey, resource: "db", phase: "create", step: stepName,
      attempt: 1, cluster: "local", plugin: "net", version: "1.0.0", ...stepGrants(spec.create.find((s) => s.name === stepName)!),
    });
    await append(Aggregates.workflow, wf, ev("ephemera.workflow.started.v1", {
      workflowId: wf, sandbox: d.sandbox, routingKey, resource: "db", phase: "create", plugin: "net", version: "1.0.0", cluster: "local", params,
    }), ev("ephemera.workflow.step_dispatched.v1", { step: stepName, runId: id, attempt: 1 }));
    await queue.publish("local", id, d);
    return id;
  };

  const result = (id: string, timeoutMs = 60_000) => waitFor(async () => {
    const last = (await store.read(Aggregates.steprun, id)).events.map(decode).filter((e): e is DomainEvent => !!e).at(-1);
    return last && last.type !== "ephemera.steprun.started.v1" ? last : undefined;
  }, { timeoutMs, intervalMs: 50, what: `the result of ${id}` });

  /** What the "reach" step saw of each target: "<target> open" or "<target> closed", a line each. */
  const reach = async (routingKey: string, targets: string[]) => {
    const outputs = await outputsOf(await result(await dispatch(routingKey, "reach", { targets: targets.join(" "), greeting: "hi" })));
    return outputs["report"]!.trim().split("\n");
  };

  const outputsOf = async (e: DomainEvent) => {
    if (e.type !== "ephemera.steprun.succeeded.v1") throw new Error(`expected success, got ${JSON.stringify(e)}`);
    const journaled = await journaledValues(values, e.data.runId, e.data.outputs);
    return Object.fromEntries([...journaled].map(([name, value]) => [name, value.toString()]));
  };

  it("reaches nothing of the host (NATS, Redis, the IO context, and a server on 0.0.0.0 standing for every other service " +
    "such as the API) on any host address, while in the same probe the outside host answers; its inputs and outputs work", async () => {
    await startRunner();
    const targets = [
      "127.0.0.1:4222", "127.0.0.1:6379", `127.0.0.1:${io.port}`,
      // Loopback, eth0, the steps' bridge gateway, the outside hosts' veths: every address of the host.
      ...hostAddresses().map((a) => `${a}:${hostPort}`),
    ];
    // The probe's control: a target it must find open, or "closed" could mean the probe itself failed.
    const control = `${outside.address}:${outside.port}`;
    const outputs = await outputsOf(await result(await dispatch("na", "reach", {
      targets: [...targets, control].join(" "), greeting: "hello from the test",
    })));
    expect(outputs["echo"]).toBe("hello from the test");
    expect(outputs["report"]!.trim().split("\n")).toEqual([...targets.map((t) => `${t} closed`), `${control} open`]);
    expect(hostAddresses().some((a) => !a.startsWith("127.") && a !== outside.hostSide)).toBe(true);
  });

  it("reaches no private network nor link-local address (where clouds serve instance metadata) out there, but the outside host " +
    "and DNS on its resolver; EPHEMERA_STEP_DENY=none leaves the private ranges to it, link-local never", async () => {
    // All three answer the host itself: the refusal is the steps' only.
    for (const h of [outside, privateHost, linkLocalHost]) {
      expect(execFileSync("ip", ["-4", "route", "get", h.address], { encoding: "utf8" })).toContain(`dev ${h.link}`);
    }
    const control = `${outside.address}:${outside.port}`;
    const privateTarget = `${privateHost.address}:${privateHost.port}`;
    const linkLocal = `${linkLocalHost.address}:${linkLocalHost.port}`;
    const resolver = `${privateHost.address}:53`;

    await startRunner("outside", { stepDns: [privateHost.address] });
    expect(await reach("da", [control, privateTarget, linkLocal, resolver]))
      .toEqual([`${control} open`, `${privateTarget} closed`, `${linkLocal} closed`, `${resolver} open`]);
    for (const r of runners.splice(0)) await r.stop();

    await startRunner("outside", { stepDeny: [] });
    expect(await reach("db", [control, privateTarget, linkLocal, resolver]))
      .toEqual([`${control} open`, `${privateTarget} open`, `${linkLocal} closed`, `${resolver} open`]);
  });

  it("reaches an outside host through the host's NAT (outside, the default); with none it cannot", async () => {
    await startRunner("outside");
    const reply = await outputsOf(await result(await dispatch("nb", "outside", { outside: `${outside.address}:${outside.port}` })));
    // Masqueraded: the outside host sees the host's address on its link, not the step's.
    expect(reply["reply"]).toBe(`outside saw ${outside.hostSide}\n`);
    for (const r of runners.splice(0)) await r.stop();

    await startRunner("none");
    const e = await result(await dispatch("nc", "outside", { outside: `${outside.address}:${outside.port}` }));
    expect(e.type === "ephemera.steprun.failed.v1" && e.data.failure).toMatchObject({ reason: "Error" });
  });

  it.each(["outside", "none"] as const)("gives each step its own loopback (%s): two steps at once both listen on 127.0.0.1:7070", async (mode) => {
    await startRunner(mode);
    const [a, b] = await Promise.all([
      dispatch("la", "loop", { scratch: scratchDir, other: "lb" }),
      dispatch("lb", "loop", { scratch: scratchDir, other: "la" }),
    ]);
    expect(await outputsOf(await result(a))).toEqual({ reply: "own la" });
    expect(await outputsOf(await result(b))).toEqual({ reply: "own lb" });
  });

  it("ends a step stopped while it waits for a free namespace as cancelled, never starting it; a closed pool refuses its waiters", async () => {
    const isolation = await detectIsolation(workdir, LAUNCHER);
    // One namespace for two steps at once: the second waits for the first's.
    const network = await openStepNetwork({ mode: "outside", prefix, workdir, slots: 1, isolation, subnets: stepSubnets(DEFAULT_STEP_SUBNETS), logger });
    expect(network.mode).toBe("outside");
    const driverDir = join(workdir, "one-slot");
    const driver = new ProcessDriver({
      workdir: driverDir, iocontext: `127.0.0.1:${io.port}`, launcher: LAUNCHER, isolation, network, logger,
      hostEnv: { PATH: process.env["PATH"] ?? "/usr/bin:/bin" }, sandbox: { uid: 65534, gid: 65534, tmpSizeBytes: 16 * 1024 * 1024 },
    });
    const runner = new Runner({
      cluster: "local", concurrency: 2, runnerId: "one-slot-runner", driver, store, queue, logs: await JetStreamLogStore.open(nc, prefix), logger,
      cancelGraceMs: 1000, heartbeatMs: 5000, claims: new InMemoryClaimStore(), claimTtlMs: 30_000, now: () => performance.now(), signingKey: TEST_KEY, values,
    });
    runner.start();
    try {
      const a = await dispatch("sa", "hold", { scratch: scratchDir });
      await waitFor(() => existsSync(join(scratchDir, "sa.started")), { timeoutMs: 30_000, what: "the first step to start" });
      const b = await dispatch("sb", "hold", { scratch: scratchDir });
      // Its script staged: the driver is at the pool, waiting for the slot the first step holds.
      await waitFor(() => existsSync(join(driverDir, "runs", b, "script")), { timeoutMs: 30_000, what: "the second step staged" });
      await queue.cancel("local", { id: `cancel-${b}`, body: pb.StepCancel.toJSON({ runIds: [b], reason: "test" }) });
      // Before the first step ends: the stopped one does not wait for a slot it will not use.
      const stopped = await result(b, 15_000);
      expect(stopped.type === "ephemera.steprun.failed.v1" && stopped.data.failure).toMatchObject({ reason: "Cancelled" });
      await writeFile(join(scratchDir, "go"), "");
      expect((await result(a)).type).toBe("ephemera.steprun.succeeded.v1");
      expect(existsSync(join(scratchDir, "sb.started"))).toBe(false);

      const held = await network.acquire();
      let waiter: string | undefined;
      network.acquire().then(() => { waiter = "got a slot"; }, (err: unknown) => { waiter = errorMessage(err); });
      await network.close();
      expect(await waitFor(() => waiter, { timeoutMs: 10_000, what: "the waiter to be answered" })).toBe("the step network is closed");
      held.release();
    } finally {
      await writeFile(join(scratchDir, "go"), "");
      await runner.stop(1000);
      driver.close();
      await driver.stop();
    }
  });

  it("gives steps loopback only, no pooled namespace, where a step's processes could outlive it (no pid namespace)", async () => {
    // What detectIsolation finds where a pid namespace cannot be made but a network namespace can.
    const isolation: Isolation = { flags: [], pidNamespace: false, netNamespace: true };
    const network = await openStepNetwork({ mode: "outside", prefix, workdir, slots: 2, isolation, subnets: stepSubnets(DEFAULT_STEP_SUBNETS), logger });
    try {
      expect(network.mode).toBe("none");
      expect((await network.acquire()).args).toEqual(["--newnet"]);
      expect(networkThingsOf(prefix)).toEqual([]);
    } finally {
      await network.close();
    }
  });

  it("leaves no namespace, interface or nftables table of its prefix once stopped; a killed runner's are removed at the next start", async () => {
    const before = forwarding();
    const runner = await startRunner();
    const made = networkThingsOf(prefix);
    expect(made.filter((t) => t.startsWith("netns"))).toHaveLength(4); // one per step slot (concurrency 4)
    expect(made.filter((t) => t.startsWith("table"))).toHaveLength(1);
    await runner.stop();
    expect(networkThingsOf(prefix)).toEqual([]);

    // A runner process of the same prefix, killed without a chance to clean up.
    const crashed = spawn(process.execPath, [join(ROOT, "services/runner/dist/main.js")], {
      stdio: "ignore",
      env: {
        PATH: process.env["PATH"], NATS_URL: process.env["NATS_URL"] ?? "nats://127.0.0.1:4222", EPHEMERA_PREFIX: prefix,
        EPHEMERA_IOCONTEXT_ADDR: `127.0.0.1:${io.port}`, EPHEMERA_RUNNER_LISTEN: "127.0.0.1:0", EPHEMERA_METRICS_LISTEN: "127.0.0.1:0",
        EPHEMERA_RUNNER_WORKDIR: join(workdir, "crash"), EPHEMERA_RUNNER_CONCURRENCY: "2", EPHEMERA_SIGNING_KEY: TEST_KEY_SECRET,
      },
    });
    try {
      const left = await waitFor(() => {
        const things = networkThingsOf(prefix);
        return things.some((t) => t.startsWith("table")) && things.filter((t) => t.startsWith("netns")).length === 2 ? things : undefined;
      }, { timeoutMs: 30_000, what: "the runner process's step network" });
      crashed.kill("SIGKILL");
      await new Promise((r) => (crashed.exitCode !== null || crashed.signalCode !== null ? r(null) : crashed.once("exit", r)));
      expect(networkThingsOf(prefix)).toEqual(left);

      const again = await startRunner();
      const now = networkThingsOf(prefix);
      expect(now.filter((t) => left.includes(t))).toEqual([]);
      expect(now.filter((t) => t.startsWith("netns"))).toHaveLength(4);
      // The uplinks the killed runner turned forwarding on for are turned off by the one that removed its leftovers.
      await again.stop();
      expect(networkThingsOf(prefix)).toEqual([]);
      // Interfaces others made or removed meanwhile (Docker's veths, in CI's container tests) are not this test's to judge.
      const after = forwarding();
      const kept = Object.keys(before).filter((d) => d in after);
      expect(kept).toEqual(expect.arrayContaining(["all", "default", "lo"]));
      expect(Object.fromEntries(kept.map((d) => [d, after[d]]))).toEqual(Object.fromEntries(kept.map((d) => [d, before[d]])));
    } finally {
      crashed.kill("SIGKILL");
    }
  });
});
