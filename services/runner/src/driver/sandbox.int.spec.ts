// The process driver's step sandbox, with real steps against this machine's NATS and Redis:
// the script runs as nobody, sees none of the runner's variables, can write its declared
// paths, /tmp and /dev/shm only (the rest of the host is read-only), and each is a small
// tmpfs of its own that it can fill.
import { execFileSync } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { mkdir, mkdtemp, rm, rmdir, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import * as pb from "@ephemera/proto";
import { Aggregates, decode, dispatchCodec, encode, ev, runId as makeRunId, workflowId, type DomainEvent, journaledValues } from "@ephemera/events";
import { connectNats, InMemoryClaimStore, JetStreamEventStore, JetStreamValueStore, JetStreamLogStore, JetStreamWorkQueue, type EventStore, type WorkQueue } from "@ephemera/eventstore";
import { createLogger, stepGrants, waitFor } from "@ephemera/kit";
import { openRedis, start as startIOContext, type Redis, type RunningIOContext } from "@ephemera/iocontext";
import { Runner } from "../runner.js";
import { detectIsolation } from "./isolation.js";
import { ProcessDriver } from "./process.js";
import { testNats } from "../../../../test/support/servers.js";
import { TEST_KEY } from "../../../../test/support/keys.js";

type NatsConnection = Awaited<ReturnType<typeof connectNats>>;

const ROOT = resolve(__dirname, "..", "..", "..", "..");
const LAUNCHER = join(ROOT, "services/runner/dist/ephemera-launch");
const OUT = "/work/sandbox-out";
const IN = "/work/sandbox-in";
const MiB = 1024 * 1024;

const step = (name: string, script: string, inputs: Array<Partial<pb.StepInput>>, outputs: Array<[string, string]> = []) => ({
  name, script, inputs: inputs as pb.StepInput[], outputs: outputs.map(([n, valueFromPath]) => ({ name: n, valueFromPath })),
});

const spec = pb.ResourcePluginSpec.fromPartial({
  create: [
    step("env", `#!/bin/sh
env > /tmp/env
if cat /proc/1/environ > /dev/null 2>&1; then echo readable; else echo unreadable; fi > /tmp/peek
`, [], [["env", "/tmp/env"], ["peek", "/tmp/peek"]]),
    step("who", "#!/bin/sh\nprintf '%s:%s' \"$(id -u)\" \"$(id -g)\" > /tmp/id\n", [], [["id", "/tmp/id"]]),
    step("confined", `#!/bin/bash
try() { if ( : > "$1" ) 2>/dev/null; then echo -n "$2:written "; else echo -n "$2:denied "; fi; }
{
  try /etc/ephemera-escape etc
  try "$RUNNER_WORKDIR/escape" workdir
  try /tmp/mine tmp
  try ${OUT}/deeper-file out
} > /tmp/result
cat ${IN}/config > ${OUT}/value
`, [{ name: "runner-workdir", valueFromSandbox: true }, { name: "config", valueFromSandbox: true, as: { env: "", path: `${IN}/config` } }],
    [["result", "/tmp/result"], ["value", `${OUT}/value`]]),
    step("readonly", `#!/bin/bash
try() { if err=$( { : > "$1"; } 2>&1 ); then echo -n "$2:written "; else case "$err" in *"Read-only file system"*) echo -n "$2:read-only ";; *) echo -n "$2:$err ";; esac; fi; }
{
  try /var/tmp/ephemera-escape var-tmp
  try /dev/shm/ephemera-escape dev-shm
  try /tmp/mine tmp
  try ${OUT}/mine out
} > /tmp/result
`, [], [["result", "/tmp/result"], ["mine", `${OUT}/mine`]]),
    step("shm", `#!/bin/sh
if [ -e "$HOST_FILE" ]; then echo seen; else echo hidden; fi > /tmp/result
printf mine > /dev/shm/ephemera-step-out && cp /dev/shm/ephemera-step-out /tmp/shm
`, [{ name: "host-file", valueFromSandbox: true }], [["result", "/tmp/result"], ["shm", "/tmp/shm"]]),
    step("link", `#!/bin/sh
ln -s /etc/shadow /tmp/secret
ln -s /etc/hostname ${OUT}/host
`, [], [["secret", "/tmp/secret"], ["host", `${OUT}/host`]]),
    step("fill", "#!/bin/sh\nhead -c 2097152 /dev/zero > /tmp/big\n", []),
    step("fill-out", `#!/bin/sh\nhead -c 2097152 /dev/zero > ${OUT}/big\n`, [], [["big", `${OUT}/big`]]),
  ],
});

describe("the process driver's step sandbox (nobody, no runner variables, 1 MiB views)", () => {
  let nc: NatsConnection;
  let store: EventStore;
  let values: JetStreamValueStore;
  let queue: WorkQueue<pb.StepDispatch>;
  let redis: Redis;
  let prefix: string;
  let cleanupStreams: (nc: NatsConnection) => Promise<void>;
  let io: RunningIOContext;
  let runner: Runner;
  let workdir: string;

  beforeAll(() => {
    execFileSync(process.execPath, [require.resolve("typescript/bin/tsc"), "-b", join(ROOT, "services/io-agent")], { stdio: "inherit" });
    for (const dir of [OUT, IN]) rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  beforeEach(async () => {
    const t = testNats("sbx");
    prefix = t.prefix;
    cleanupStreams = t.cleanup;
    nc = await connectNats(t.url, "sandbox-test");
    store = await JetStreamEventStore.open(nc, { prefix });
    values = await JetStreamValueStore.open(nc, prefix);
    queue = await JetStreamWorkQueue.open(nc, prefix, dispatchCodec);
    redis = openRedis(process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379");
    // Outside /tmp (which the step sees as its own tmpfs), so a write there would be a real escape.
    workdir = await mkdtemp(join("/var/tmp", `${prefix}-work-`));
    const logger = createLogger("test", "silent");
    io = await startIOContext({ listen: "127.0.0.1:0", prefix, keys: [TEST_KEY] }, { store, redis, values, logger });
    const driver = new ProcessDriver({
      workdir, iocontext: `127.0.0.1:${io.port}`, launcher: LAUNCHER, isolation: await detectIsolation(workdir, LAUNCHER), logger,
      // As a careless composition might hand it: the driver must pass PATH and LANG only.
      hostEnv: {
        PATH: process.env["PATH"] ?? "/usr/bin:/bin", NATS_URL: "nats://user:secret@127.0.0.1:4222",
        REDIS_URL: "redis://:secret@127.0.0.1:6379", NATS_PASSWORD: "secret", EPHEMERA_PREFIX: prefix,
      },
      sandbox: { uid: 65534, gid: 65534, tmpSizeBytes: MiB, readOnlyHost: true },
    });
    runner = new Runner({
      cluster: "local", concurrency: 4, runnerId: "sandbox-runner", driver, store, queue, logs: await JetStreamLogStore.open(nc, prefix), logger,
      cancelGraceMs: 2000, heartbeatMs: 5000, claims: new InMemoryClaimStore(), claimTtlMs: 30_000, now: () => performance.now(), signingKey: TEST_KEY, values,
    });
    runner.start();
    await append(Aggregates.plugin, "sandboxed", ev("ephemera.plugin.published.v1", { name: "sandboxed", version: "1.0.0", spec }));
  });

  afterEach(async () => {
    await runner.stop(1000);
    await io.stop();
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length) await redis.del(...keys);
    await redis.quit();
    await cleanupStreams(nc);
    await nc.close();
    await rm(workdir, { recursive: true, force: true });
  });

  afterAll(async () => {
    for (const dir of [OUT, IN]) await rmdir(dir).catch(() => undefined);
  });

  const append = async (aggregate: string, id: string, ...events: DomainEvent[]) => {
    const current = await store.read(aggregate, id);
    await store.append(aggregate, id, current, events.map(encode), { source: "test" });
  };

  const run = async (routingKey: string, stepName: string, params: Record<string, string> = {}) => {
    const wf = workflowId(routingKey, "db", "create");
    const id = makeRunId(wf, stepName, 1);
    const d = pb.StepDispatch.fromPartial({
      runId: id, workflowId: wf, sandbox: `sb-${routingKey}`, routingKey, resource: "db", phase: "create", step: stepName,
      attempt: 1, cluster: "local", plugin: "sandboxed", version: "1.0.0",
      ...stepGrants(spec.create.find((st) => st.name === stepName)!),
    });
    await append(Aggregates.workflow, wf, ev("ephemera.workflow.started.v1", {
      workflowId: wf, sandbox: d.sandbox, routingKey, resource: "db", phase: "create", plugin: "sandboxed", version: "1.0.0", cluster: "local", params,
    }), ev("ephemera.workflow.step_dispatched.v1", { step: stepName, runId: id, attempt: 1 }));
    await queue.publish("local", id, d);
    return waitFor(async () => {
      const last = (await store.read(Aggregates.steprun, id)).events.map(decode).filter((e): e is DomainEvent => !!e).at(-1);
      return last && last.type !== "ephemera.steprun.started.v1" ? last : undefined;
    }, { timeoutMs: 30_000, intervalMs: 50, what: `the result of ${id}` });
  };

  /** A success's output values, read from the output journal by the digests its event names. */
  const outputsOf = async (e: DomainEvent) => {
    if (e.type !== "ephemera.steprun.succeeded.v1") throw new Error(`expected success, got ${JSON.stringify(e)}`);
    const journaled = await journaledValues(values, e.data.runId, e.data.outputs);
    return Object.fromEntries([...journaled].map(([name, value]) => [name, value.toString()]));
  };

  it("gives the script PATH, LANG and its own variables only: no NATS/Redis URL, no credentials, no step config", async () => {
    const previous = process.env["NATS_PASSWORD"];
    process.env["NATS_PASSWORD"] = "inherited-secret"; // not inherited from the runner's environment either
    try {
      const outputs = (await outputsOf(await run("sa", "env")));
      const shells = new Set(["PWD", "OLDPWD", "SHLVL", "_"]);
      const names = outputs["env"]!.split("\n").filter(Boolean).map((l) => l.split("=")[0]!).filter((n) => !shells.has(n));
      expect(names.sort()).toEqual([
        "EPHEMERA_PHASE", "EPHEMERA_RESOURCE_NAME", "EPHEMERA_ROUTING_KEY", "EPHEMERA_RUN_ID", "EPHEMERA_SANDBOX_NAME", "EPHEMERA_STEP_NAME",
        "HOME", "PATH", "SIGNADOT_RESOURCE_NAME", "SIGNADOT_SANDBOX_ID", "SIGNADOT_SANDBOX_NAME", "SIGNADOT_SANDBOX_ROUTING_KEY",
      ]);
      expect(outputs["env"]).not.toContain("secret");
      // The step program's own environment (which holds the run's IO-context token) is not the script's to read.
      expect(outputs["peek"]).toBe("unreadable\n");
    } finally {
      if (previous === undefined) delete process.env["NATS_PASSWORD"];
      else process.env["NATS_PASSWORD"] = previous;
    }
  });

  it("runs the script as the configured user and group", async () => {
    expect(await outputsOf(await run("sb", "who"))).toEqual({ id: "65534:65534" });
  });

  it("lets the script write its declared paths and /tmp, and read its input file; not /etc nor the runner's workdir", async () => {
    await mkdir(IN, { recursive: true });
    const outputs = (await outputsOf(await run("sc", "confined", { "runner-workdir": workdir, config: "5432" })));
    expect(outputs).toEqual({ result: "etc:denied workdir:denied tmp:written out:written ", value: "5432" });
    expect(existsSync("/etc/ephemera-escape")).toBe(false);
    expect(existsSync(join(workdir, "escape"))).toBe(false);
  });

  it("leaves the host read-only to the script, world-writable /var/tmp included; its views (its own /dev/shm among them) stay writable", async () => {
    const outputs = (await outputsOf(await run("sg", "readonly")));
    expect(outputs["result"]).toBe("var-tmp:read-only dev-shm:written tmp:written out:written ");
    expect(existsSync("/var/tmp/ephemera-escape")).toBe(false);
    expect(existsSync("/dev/shm/ephemera-escape")).toBe(false);
  });

  it("gives the script a /dev/shm of its own, declared or not: the host's (where run directories live by default) is hidden", async () => {
    const hostDir = join("/dev/shm", `${prefix}-host`);
    await mkdir(hostDir, { recursive: true });
    try {
      await writeFile(join(hostDir, "file"), "another run's input");
      const outputs = await outputsOf(await run("sh", "shm", { "host-file": join(hostDir, "file") }));
      expect(outputs).toEqual({ result: "hidden\n", shm: "mine" });
      expect(existsSync("/dev/shm/ephemera-step-out")).toBe(false);
    } finally {
      await rm(hostDir, { recursive: true, force: true });
    }
  });

  it("never follows a link the script left in place of an output: reading it as root cannot leak /etc/shadow", async () => {
    const e = await run("sf", "link");
    expect(e.type === "ephemera.steprun.failed.v1" && e.data.failure).toMatchObject({
      reason: "OutputMissing", message: expect.stringContaining('output "secret"'),
    });
  });

  it("fails a script that fills its /tmp past the quota, naming the quota", async () => {
    const e = await run("sd", "fill");
    expect(e.type === "ephemera.steprun.failed.v1" && e.data.failure).toMatchObject({
      reason: "Error", exitCode: 1, message: expect.stringMatching(/\/tmp full: the step's 1 MiB quota per private view, EPHEMERA_STEP_TMP_SIZE/),
    });
  });

  it("bounds a declared output directory by the same quota", async () => {
    const e = await run("se", "fill-out");
    expect(e.type === "ephemera.steprun.failed.v1" && e.data.failure).toMatchObject({
      reason: "Error", message: expect.stringContaining(`${OUT} full`),
    });
  });
});
