// A process-driver step's network is its own: a real runner (the process driver, as root)
// against this machine's NATS and Redis. From inside a step nothing of the host answers
// (NATS, Redis, the IO context, a server the test listens with on every host address), its
// inputs and outputs still work, an "outside" host (a namespace the test makes) is reached
// through the NAT, loopback is the step's own, and the runner leaves nothing behind.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { createHash, randomInt } from "node:crypto";
import { readFileSync, readdirSync } from "node:fs";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { networkInterfaces, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import * as pb from "@ephemera/proto";
import { Aggregates, decode, dispatchCodec, encode, ev, runId as makeRunId, workflowId, type DomainEvent, journaledValues } from "@ephemera/events";
import {
  connectNats, JetStreamEventStore, JetStreamLogStore, JetStreamValueStore, JetStreamWorkQueue, type EventStore, type WorkQueue,
} from "@ephemera/eventstore";
import { createLogger, stepGrants, waitFor } from "@ephemera/kit";
import { openRedis, start as startIOContext, type Redis, type RunningIOContext } from "@ephemera/iocontext";
import { start, type RunningRunner } from "../index.js";
import type { RunnerConfig } from "../config.js";
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

/** A host of the "outside world": a namespace of the test's own, a veth to the host, in 198.18.0.0/15 (benchmarking). */
class OutsideHost {
  readonly ns = `ephtest-out-${process.pid}-${randomInt(1e6)}`;
  readonly link = `ephto${randomInt(1e8)}`;
  readonly net = `198.18.${randomInt(256)}`;
  port = 0;
  private server?: ChildProcess;

  get address(): string { return `${this.net}.2`; }
  get hostSide(): string { return `${this.net}.1`; }

  async start(port: number): Promise<void> {
    this.port = port;
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
      `require("node:net").createServer((s) => s.end("outside saw " + s.remoteAddress + "\\n"))` +
      `.listen(${port}, "${this.address}", () => console.log("listening"))`], { stdio: ["ignore", "pipe", "inherit"] });
    this.server = server;
    let said = "";
    server.stdout!.on("data", (c: Buffer) => { said += c.toString(); });
    await waitFor(() => said.includes("listening"), { timeoutMs: 10_000, what: "the outside host's server" });
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
  const logger = createLogger("test", "silent");

  beforeAll(async () => {
    // A test below kills a runner started as a process: it must match the sources.
    execFileSync(process.execPath, [require.resolve("typescript/bin/tsc"), "-b", join(ROOT, "services/runner")], { stdio: "inherit" });
    // On every address of the host, as a careless service would listen.
    hostServer = createServer((s) => s.on("error", () => undefined).end("host\n"));
    await new Promise<void>((r) => hostServer.listen(0, "0.0.0.0", r));
    hostPort = (hostServer.address() as { port: number }).port;
    await outside.start(9000 + randomInt(1000));
  }, 120_000);

  afterAll(async () => {
    outside.stop();
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

  const startRunner = async (stepNetwork?: RunnerConfig["stepNetwork"]) => {
    const runner = await start({
      natsUrl: "", prefix, cluster: "local", concurrency: 4, driver: "process", iocontextAddr: `127.0.0.1:${io.port}`,
      workdir, listen: "127.0.0.1:0", runnerId: "net-runner", launcher: LAUNCHER, hostEnv: { PATH: process.env["PATH"] ?? "/usr/bin:/bin" },
      // As nobody; the host stays writable so that two steps can meet in the scratch directory.
      stepSandbox: { uid: 65534, gid: 65534, tmpSizeBytes: 16 * 1024 * 1024 },
      cancelGraceMs: 1000, shutdownGraceMs: 1000, ...(stepNetwork ? { stepNetwork } : {}),
    }, { store, queue, logs: await JetStreamLogStore.open(nc, prefix), logger, signingKey: TEST_KEY, values });
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

  const result = (id: string) => waitFor(async () => {
    const last = (await store.read(Aggregates.steprun, id)).events.map(decode).filter((e): e is DomainEvent => !!e).at(-1);
    return last && last.type !== "ephemera.steprun.started.v1" ? last : undefined;
  }, { timeoutMs: 60_000, intervalMs: 50, what: `the result of ${id}` });

  const outputsOf = async (e: DomainEvent) => {
    if (e.type !== "ephemera.steprun.succeeded.v1") throw new Error(`expected success, got ${JSON.stringify(e)}`);
    const journaled = await journaledValues(values, e.data.runId, e.data.outputs);
    return Object.fromEntries([...journaled].map(([name, value]) => [name, value.toString()]));
  };

  it("reaches nothing of the host (NATS, Redis, the IO context, a server on any host address); its inputs and outputs work", async () => {
    await startRunner();
    const targets = [
      "127.0.0.1:4222", "127.0.0.1:6379", `127.0.0.1:${io.port}`,
      // Loopback, eth0, the steps' bridge gateway, the outside host's veth: every address of the host.
      ...hostAddresses().map((a) => `${a}:${hostPort}`),
    ];
    const outputs = await outputsOf(await result(await dispatch("na", "reach", { targets: targets.join(" "), greeting: "hello from the test" })));
    expect(outputs["echo"]).toBe("hello from the test");
    expect(outputs["report"]!.trim().split("\n")).toEqual(targets.map((t) => `${t} closed`));
    expect(hostAddresses().some((a) => !a.startsWith("127.") && a !== outside.hostSide)).toBe(true);
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
      expect(forwarding()).toEqual(before);
    } finally {
      crashed.kill("SIGKILL");
    }
  });
});
