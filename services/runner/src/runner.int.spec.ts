import { execFileSync, spawn } from "node:child_process";
import { existsSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readFile, readdir, rm, rmdir, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import * as pb from "@ephemera/proto";
import { Aggregates, decode, dispatchCodec, encode, ev, runId as makeRunId, workflowId, type DomainEvent, journaledValues } from "@ephemera/events";
import {
  connectNats, JetStreamClaimStore, JetStreamEventStore, JetStreamLogStore, JetStreamValueStore, JetStreamWorkQueue,
  type ClaimStore, type EventStore, type LogStore, type WorkQueue,
} from "@ephemera/eventstore";
import { createLogger, stepGrants, waitFor } from "@ephemera/kit";
import { REPORT_FILE } from "@ephemera/io-agent";
import { openRedis, start as startIOContext, type Redis, type RunningIOContext } from "@ephemera/iocontext";
import { start, type RunningRunner } from "./index.js";
import type { RunnerConfig } from "./config.js";
import { testNats } from "../../../test/support/servers.js";
import { TEST_KEY, TEST_KEY_SECRET } from "../../../test/support/keys.js";

type NatsConnection = Awaited<ReturnType<typeof connectNats>>;

const ROOT = resolve(__dirname, "..", "..", "..");
const LAUNCHER = join(ROOT, "services/runner/dist/ephemera-launch");
const SHARED_OUT = "/work/shared-out";
const NESTED = "/work/runner-in";

/** Host pids of the processes that belong to a run (its script and everything the script started). */
function processesOf(runId: string): number[] {
  const marker = Buffer.from(`EPHEMERA_RUN_ID=${runId}\0`);
  return readdirSync("/proc").filter((p) => /^\d+$/.test(p)).map(Number).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/environ`).includes(marker);
    } catch {
      return false; // gone meanwhile, or not ours to read
    }
  });
}

const step = (name: string, script: string, inputs: Array<Partial<pb.StepInput>>, outputs: Array<[string, string]> = []) => ({
  name, script, inputs: inputs as pb.StepInput[], outputs: outputs.map(([n, valueFromPath]) => ({ name: n, valueFromPath })),
});
const scratch = { name: "scratch", valueFromSandbox: true };
const MiB = 1024 * 1024;

const spec = pb.ResourcePluginSpec.fromPartial({
  create: [
    step("provision", `#!/usr/bin/env bash
set -eu
echo started >> "$SCRATCH/count-$EPHEMERA_ROUTING_KEY"
echo "provisioning $DB_NAME for $SIGNADOT_SANDBOX_NAME/$SIGNADOT_RESOURCE_NAME ($SIGNADOT_SANDBOX_ID) in $HOME"
printf 'db-%s' "$SIGNADOT_SANDBOX_ROUTING_KEY" > /tmp/host
printf '%s' "$(cat ${NESTED}/config)" > ${NESTED}/deeper/port
`, [{ name: "db-name", valueFromSandbox: true }, scratch, { name: "config", valueFromSandbox: true, as: { env: "", path: `${NESTED}/config` } }],
    [["host", "/tmp/host"], ["port", `${NESTED}/deeper/port`]]),
    step("fail", `#!/usr/bin/env bash
for i in $(seq 1 100); do echo "line $i"; done
echo "giving up" >&2
exit 3
`, []),
    step("share", `#!/usr/bin/env bash
set -eu
printf '%s' "$EPHEMERA_ROUTING_KEY" > ${SHARED_OUT}/value
echo "$EPHEMERA_ROUTING_KEY" > /tmp/mine
touch "$SCRATCH/$EPHEMERA_ROUTING_KEY.ready"
while [ ! -e "$SCRATCH/go" ]; do sleep 0.05; done
listing="$(echo $(ls -A ${SHARED_OUT}) $(ls -A /tmp))"
printf '%s' "$listing" > /tmp/listing
`, [scratch], [["value", `${SHARED_OUT}/value`], ["listing", "/tmp/listing"]]),
    step("hang", `#!/usr/bin/env bash
trap 'echo "stopping on TERM"; exit 143' TERM
sleep 300 &
touch "$SCRATCH/$EPHEMERA_ROUTING_KEY.started"
wait
`, [scratch]),
    step("stubborn", `#!/usr/bin/env bash
trap '' TERM
setsid sleep 300 &
touch "$SCRATCH/$EPHEMERA_ROUTING_KEY.started"
wait
`, [scratch]),
    step("hold", `#!/usr/bin/env bash
set -eu
echo ran >> "$SCRATCH/count-$EPHEMERA_ROUTING_KEY"
touch "$SCRATCH/$EPHEMERA_ROUTING_KEY.started"
while [ ! -e "$SCRATCH/$EPHEMERA_ROUTING_KEY.go" ]; do sleep 0.05; done
`, [scratch]),
    step("forget", "#!/bin/sh\necho 'not writing the output'\n", [], [["result", "/tmp/result"]]),
    // Three outputs of exactly the limit (1 MiB each), and one a byte over it.
    step("bulky", "#!/bin/sh\nfor f in a b c; do head -c 1048576 /dev/urandom > /tmp/$f; done\n", [], [["a", "/tmp/a"], ["b", "/tmp/b"], ["c", "/tmp/c"]]),
    step("toobig", "#!/bin/sh\nhead -c 1048577 /dev/zero > /tmp/x\n", [], [["x", "/tmp/x"]]),
  ],
});

describe("runner with the process driver, against NATS and Redis", () => {
  let nc: NatsConnection;
  let store: EventStore;
  let values: JetStreamValueStore;
  let queue: WorkQueue<pb.StepDispatch>;
  let logs: LogStore;
  let claims: ClaimStore;
  /** Per run whose result was kept with its claim: whether the run's result was still unrecorded then. */
  const keptBeforeRecord = new Map<string, boolean>();
  let redis: Redis;
  let prefix: string;
  let cleanupStreams: (nc: NatsConnection) => Promise<void>;
  let io: RunningIOContext;
  let runner: RunningRunner;
  let scratchDir: string;
  let workdir: string;
  /** Dispatches handed to the runner, and those it finished handling (so the item was acked). */
  let received: string[];
  let handled: string[];

  beforeAll(() => {
    // The process driver runs io-agent's built step program, and one test runs the built
    // runner as a process: make sure both match the sources.
    execFileSync(process.execPath, [require.resolve("typescript/bin/tsc"), "-b", join(ROOT, "services/runner")], { stdio: "inherit" });
    // These host paths belong to this file: a run interrupted half-way may have left them.
    for (const dir of [SHARED_OUT, NESTED]) rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  beforeEach(async () => {
    const t = testNats("run");
    prefix = t.prefix;
    cleanupStreams = t.cleanup;
    nc = await connectNats(t.url, "runner-test");
    store = await JetStreamEventStore.open(nc, { prefix });
    values = await JetStreamValueStore.open(nc, prefix);
    const jsQueue = await JetStreamWorkQueue.open(nc, prefix, dispatchCodec);
    received = [];
    handled = [];
    queue = {
      publish: (c, id, d) => jsQueue.publish(c, id, d),
      consume: (c, o, h) => jsQueue.consume(c, o, async (item) => {
        received.push(item.data.runId);
        await h(item);
        handled.push(item.data.runId);
      }),
      cancel: (c, m) => jsQueue.cancel(c, m),
      onCancel: (c, h) => jsQueue.onCancel(c, h),
    };
    logs = await JetStreamLogStore.open(nc, prefix);
    const jsClaims = await JetStreamClaimStore.open(nc, prefix);
    claims = {
      read: (id) => jsClaims.read(id),
      acquire: (id, holder, ttlMs, options) => jsClaims.acquire(id, holder, ttlMs, options),
      release: (c) => jsClaims.release(c),
      renew: async (c, ttlMs, result) => {
        if (result !== undefined && result !== c.result) keptBeforeRecord.set(c.id, (await stepRunEvents(c.id)).length === 1);
        return jsClaims.renew(c, ttlMs, result);
      },
    };
    redis = openRedis(process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379");
    // Outside /tmp and outside every declared path: visible to the test and to every step.
    scratchDir = await mkdtemp(join("/var/tmp", `${prefix}-scratch-`));
    // A runner started as a process runs its scripts as nobody: they write here too.
    await chmod(scratchDir, 0o1777);
    workdir = await mkdtemp(join(tmpdir(), `${prefix}-work-`));
    const logger = createLogger("test", "silent");
    io = await startIOContext({ listen: "127.0.0.1:0", prefix, keys: [TEST_KEY] }, { store, redis, values, logger });
    runner = await start({
      natsUrl: t.url, prefix, cluster: "local", concurrency: 8, driver: "process", iocontextAddr: `127.0.0.1:${io.port}`,
      workdir, listen: "127.0.0.1:0", runnerId: "test-runner", launcher: LAUNCHER, hostEnv: { PATH: process.env["PATH"] ?? "/usr/bin:/bin" },
      cancelGraceMs: 2000, shutdownGraceMs: 1000,
    }, { store, queue, logs, claims, logger, signingKey: TEST_KEY, values });
    await append(Aggregates.plugin, "hello-db", ev("ephemera.plugin.published.v1", { name: "hello-db", version: "1.0.0", spec }));
  });

  afterEach(async () => {
    await runner.stop();
    await io.stop();
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length) await redis.del(...keys);
    await redis.quit();
    await cleanupStreams(nc);
    await nc.close();
    await rm(scratchDir, { recursive: true, force: true });
    await rm(workdir, { recursive: true, force: true });
  });

  afterAll(async () => {
    // The driver creates a missing view directory on the host; it stays empty.
    for (const dir of [SHARED_OUT, NESTED]) await rmdir(dir).catch(() => undefined);
  });

  const append = async (aggregate: string, id: string, ...events: DomainEvent[]) => {
    const current = await store.read(aggregate, id);
    await store.append(aggregate, id, current, events.map(encode), { source: "test" });
  };

  /** What the scheduler puts in a dispatch for the runner to sign into the run's token. */
  const capability = (stepName: string) => {
    const step = spec.create.find((st) => st.name === stepName);
    return step ? stepGrants(step) : {};
  };

  /** What the scheduler does: start the workflow, record the dispatch, then publish it. */
  const dispatch = async (routingKey: string, stepName: string, params: Record<string, string> = {}, cluster = "local", extra: Partial<pb.StepDispatch> = {}) => {
    const wf = workflowId(routingKey, "db", "create");
    const run = makeRunId(wf, stepName, 1);
    const d = pb.StepDispatch.fromPartial({
      runId: run, workflowId: wf, sandbox: `sb-${routingKey}`, routingKey, resource: "db", phase: "create", step: stepName,
      attempt: 1, cluster, plugin: "hello-db", version: "1.0.0", ...capability(stepName), ...extra,
    });
    const existing = await store.read(Aggregates.workflow, wf);
    await store.append(Aggregates.workflow, wf, existing, [
      ...(existing.version === 0 ? [ev("ephemera.workflow.started.v1", {
        workflowId: wf, sandbox: d.sandbox, routingKey, resource: "db", phase: "create", plugin: "hello-db", version: "1.0.0",
        cluster, params: { scratch: scratchDir, ...params },
      })] : []),
      ev("ephemera.workflow.step_dispatched.v1", { step: stepName, runId: run, attempt: 1 }),
    ].map(encode), { source: "test" });
    await queue.publish(cluster, run, d);
    return d;
  };

  const stepRunEvents = async (run: string) => (await store.read(Aggregates.steprun, run)).events.map(decode).filter((e): e is DomainEvent => !!e);

  const result = (run: string, timeoutMs = 30_000) => waitFor(async () => {
    const last = (await stepRunEvents(run)).at(-1);
    return last && last.type !== "ephemera.steprun.started.v1" ? last : undefined;
  }, { timeoutMs, intervalMs: 50, what: `the result of ${run}` });

  /** A success's output values, read from the output journal by the digests its event names. */
  const outputsOf = async (e: DomainEvent) => {
    if (e.type !== "ephemera.steprun.succeeded.v1") throw new Error(`expected success, got ${JSON.stringify(e)}`);
    const journaled = await journaledValues(values, e.data.runId, e.data.outputs);
    return Object.fromEntries([...journaled].map(([name, value]) => [name, value.toString()]));
  };

  it("runs a bash script with its inputs and the default environment, and journals its outputs", async () => {
    const d = await dispatch("rka", "provision", { "db-name": "orders", config: "5432" });
    const e = await result(d.runId);
    expect(await outputsOf(e)).toEqual({ host: "db-rka", port: "5432" });
    // Its result was kept with the run's claim first, while the run showed only its start.
    expect(keptBeforeRecord.get(d.runId)).toBe(true);
    expect(await stepRunEvents(d.runId)).toEqual([
      expect.objectContaining({ type: "ephemera.steprun.started.v1", data: expect.objectContaining({ driver: "process", runner: "test-runner" }) }),
      expect.objectContaining({ type: "ephemera.steprun.succeeded.v1" }),
    ]);
    expect((await logs.read(d.runId)).toString()).toContain("provisioning orders for sb-rka/db (rka) in /tmp");
    // The input file and the output lived in the step's private views only (the nested one too).
    expect(existsSync(`${NESTED}/config`)).toBe(false);
    expect(existsSync(`${NESTED}/deeper`)).toBe(false);
    await waitFor(() => handled.includes(d.runId), { what: "the dispatch to be acknowledged" });
  });

  it("journals a step's outputs from its own report while its Redis keys vanish every 100 ms", async () => {
    // Redis is only a cache: wiping this test's keys over and over cannot lose an output.
    const wipe = setInterval(() => {
      void redis.keys(`${prefix}:*`).then((keys) => (keys.length ? redis.del(...keys) : 0)).catch(() => undefined);
    }, 100);
    try {
      const d = await dispatch("rkw", "provision", { "db-name": "orders", config: "5432" });
      expect(await outputsOf(await result(d.runId))).toEqual({ host: "db-rkw", port: "5432" });
    } finally {
      clearInterval(wipe);
    }
  });

  it("records a non-zero exit as failed with the exit code, reason Error and the log tail; the whole log is stored", async () => {
    const d = await dispatch("rkb", "fail");
    const e = await result(d.runId);
    expect(e.type).toBe("ephemera.steprun.failed.v1");
    if (e.type !== "ephemera.steprun.failed.v1") return;
    expect(e.data.failure).toMatchObject({ step: "fail", runId: d.runId, exitCode: 3, reason: "Error" });
    const tail = e.data.failure!.logTail.split("\n");
    expect(tail).toHaveLength(40);
    expect(tail.at(-1)).toBe("giving up");
    expect(tail[0]).toBe("line 62");
    const log = (await logs.read(d.runId)).toString();
    expect(log).toContain("line 1\n");
    expect(log).toContain("line 100\n");
  });

  it("fails a step that does not write a declared output with OutputMissing", async () => {
    const d = await dispatch("rkc", "forget");
    const e = await result(d.runId);
    expect(e.type === "ephemera.steprun.failed.v1" && e.data.failure).toMatchObject({ reason: "OutputMissing", message: expect.stringContaining('"result"') });
  });

  it("journals three 1 MiB outputs of one step outside its result event, each named by size and digest", async () => {
    const d = await dispatch("rkt", "bulky");
    const e = await result(d.runId, 60_000);
    if (e.type !== "ephemera.steprun.succeeded.v1") throw new Error(`expected success, got ${JSON.stringify(e)}`);
    expect(e.data.outputs.map((o) => [o.name, o.size, o.value.length, o.sha256.length])).toEqual([["a", MiB, 0, 64], ["b", MiB, 0, 64], ["c", MiB, 0, 64]]);
    const recorded = (await store.read(Aggregates.steprun, d.runId)).events.at(-1)!;
    expect(JSON.stringify(recorded.data).length).toBeLessThan(2048);
    const journaled = await journaledValues(values, d.runId, e.data.outputs);
    expect([...journaled.values()].map((v) => v.length)).toEqual([MiB, MiB, MiB]);
  });

  it("refuses an output of 1 MiB + 1 byte, naming it, its size and the limit; nothing is journaled", async () => {
    const d = await dispatch("rku", "toobig");
    const e = await result(d.runId);
    expect(e.type === "ephemera.steprun.failed.v1" && e.data.failure).toMatchObject({
      reason: "OutputTooLarge", message: expect.stringContaining('output "x": /tmp/x is 1048577 bytes, over the 1048576-byte limit'),
    });
    expect(await values.drop(`${d.runId}/`)).toBe(0);
  });

  it("gives two concurrent runs of one plugin private files at the same paths", async () => {
    const [a, b] = [await dispatch("rk1", "share"), await dispatch("rk2", "share")];
    await waitFor(() => existsSync(join(scratchDir, "rk1.ready")) && existsSync(join(scratchDir, "rk2.ready")), {
      timeoutMs: 30_000, what: "both runs to have written their files",
    });
    await writeFile(join(scratchDir, "go"), "");
    const [ea, eb] = [await result(a.runId), await result(b.runId)];
    expect(await outputsOf(ea)).toEqual({ value: "rk1", listing: "value .ephemera mine" });
    expect(await outputsOf(eb)).toEqual({ value: "rk2", listing: "value .ephemera mine" });
    expect(await readdir(SHARED_OUT)).toEqual([]);
  });

  it("starts no second process when a finished run is delivered again", async () => {
    const d = await dispatch("rkd", "provision", { "db-name": "orders", config: "1" });
    await result(d.runId);
    await waitFor(() => handled.includes(d.runId), { what: "the first delivery to be acknowledged" });
    await queue.publish("local", `${d.runId}-again`, d); // a new message id: the queue delivers it
    await waitFor(() => handled.filter((r) => r === d.runId).length === 2, { what: "the second delivery to be handled" });
    expect(await readFile(join(scratchDir, "count-rkd"), "utf8")).toBe("started\n");
    expect((await stepRunEvents(d.runId)).map((e) => e.type)).toEqual(["ephemera.steprun.started.v1", "ephemera.steprun.succeeded.v1"]);
  });

  it("stops a step that runs past its timeout and records DeadlineExceeded", async () => {
    // The timeout counts from the start of the step program: long enough for its script to
    // be running (the barrier below) when the deadline comes, so it is the script that gets TERM.
    const d = await dispatch("rkk", "hang", {}, "local", { timeoutMs: 5000 });
    await waitFor(() => existsSync(join(scratchDir, "rkk.started")), { timeoutMs: 5000, what: "the hanging script to run before its deadline" });
    const e = await result(d.runId);
    expect(e.type === "ephemera.steprun.failed.v1" && e.data.failure).toMatchObject({
      reason: "DeadlineExceeded", message: expect.stringContaining("timeout of 5s"), logTail: expect.stringContaining("stopping on TERM"),
    });
    expect(processesOf(d.runId)).toEqual([]);
  });

  it("runs a step with a 1000h timeout to its end (a deadline past setTimeout's 24.8 days is not an instant one)", async () => {
    const d = await dispatch("rkt", "share", {}, "local", { timeoutMs: 1000 * 3_600_000 });
    // Seen running (or ended): an overflowed deadline (fired after 1 ms) would have stopped it by now.
    await waitFor(async () => existsSync(join(scratchDir, "rkt.ready")) || (await stepRunEvents(d.runId)).length > 1,
      { timeoutMs: 30_000, what: "the step to be running" });
    await writeFile(join(scratchDir, "go"), "");
    const e = await result(d.runId);
    expect(e.type === "ephemera.steprun.failed.v1" ? e.data.failure : undefined).toBeUndefined();
    expect(await outputsOf(e)).toEqual({ value: "rkt", listing: "value .ephemera mine" });
  });

  it("records the result a runner that died left on disk, without running the step again", async () => {
    const wf = workflowId("rkl", "db", "create");
    const run = makeRunId(wf, "provision", 1);
    await append(Aggregates.steprun, run, ev("ephemera.steprun.started.v1", { runId: run, workflowId: wf, step: "provision", attempt: 1, runner: "gone-2" }));
    await mkdir(join(workdir, "runs", run), { recursive: true });
    await writeFile(join(workdir, "runs", run, REPORT_FILE), JSON.stringify({ outcome: "failed", reason: "Error", exitCode: 7, message: "the script exited with code 7" }));
    await dispatch("rkl", "provision", { "db-name": "orders", config: "1" });
    const e = await result(run);
    expect(e.type === "ephemera.steprun.failed.v1" && e.data.failure).toMatchObject({ reason: "Error", exitCode: 7 });
    expect(existsSync(join(scratchDir, "count-rkl"))).toBe(false);
    await waitFor(() => !existsSync(join(workdir, "runs", run)), { what: "the run directory to be cleaned up once recorded" });
  });

  it("records the result a lost runner kept with the run's claim, without running the step again", async () => {
    const wf = workflowId("rkk", "db", "create");
    const run = makeRunId(wf, "provision", 1);
    await append(Aggregates.steprun, run, ev("ephemera.steprun.started.v1", { runId: run, workflowId: wf, step: "provision", attempt: 1, runner: "gone-3" }));
    // gone-3's script ended and it kept the result with its claim; it died before recording it.
    const got = await claims.acquire(run, "gone-3", 1_000);
    if (!got.taken) throw new Error("expected to take the claim");
    const b64 = (v: string) => Buffer.from(v).toString("base64");
    const kept = await claims.renew(got.claim, 50, JSON.stringify({
      type: "succeed", durationMs: 12,
      outputs: [{ name: "host", value: b64("db-kept"), size: 7, sha256: "" }, { name: "port", value: b64("6543"), size: 4, sha256: "" }],
    }));
    await waitFor(() => Date.now() > kept.until, { what: "gone-3's claim to expire" });
    await dispatch("rkk", "provision", { "db-name": "orders", config: "1" });
    const e = await result(run);
    expect(await outputsOf(e)).toEqual({ host: "db-kept", port: "6543" });
    expect((await stepRunEvents(run)).map((x) => x.type)).toEqual(["ephemera.steprun.started.v1", "ephemera.steprun.succeeded.v1"]);
    expect(existsSync(join(scratchDir, "count-rkk"))).toBe(false);
    // Recorded, the claim is released: nothing is kept for the run any more.
    await waitFor(async () => (await claims.read(run)) === undefined, { what: "the run's claim released" });
  });

  it("drops a dispatch its workflow no longer wants, and records why", async () => {
    const d = await dispatch("rkm", "provision", { "db-name": "orders", config: "1" });
    await result(d.runId);
    // Attempt 2 was never dispatched by its workflow: a stray delivery is dropped, not run.
    const stray = pb.StepDispatch.fromPartial({ ...d, runId: makeRunId(d.workflowId, "provision", 2), attempt: 2 });
    await queue.publish("local", stray.runId, stray);
    const e = await result(stray.runId);
    expect(e.type === "ephemera.steprun.failed.v1" && e.data.failure).toMatchObject({ reason: "Cancelled", message: expect.stringContaining("not its step's current attempt") });
    expect((await stepRunEvents(stray.runId)).map((x) => x.type)).toEqual(["ephemera.steprun.failed.v1"]);
    expect(await readFile(join(scratchDir, "count-rkm"), "utf8")).toBe("started\n");
  });

  it("runs a dispatch of a workflow retried after it failed", async () => {
    const first = await dispatch("rkn", "fail");
    await result(first.runId);
    await append(Aggregates.workflow, first.workflowId,
      ev("ephemera.workflow.step_failed.v1", { step: "fail", runId: first.runId }),
      ev("ephemera.workflow.failed.v1", {}),
      ev("ephemera.workflow.retried.v1", { steps: ["fail"] }),
      ev("ephemera.workflow.step_dispatched.v1", { step: "fail", runId: makeRunId(first.workflowId, "fail", 2), attempt: 2 }));
    const again = pb.StepDispatch.fromPartial({ ...first, runId: makeRunId(first.workflowId, "fail", 2), attempt: 2 });
    await queue.publish("local", again.runId, again);
    // It ran (and failed as its script does), rather than being dropped as Cancelled.
    const e = await result(again.runId);
    expect(e.type === "ephemera.steprun.failed.v1" && e.data.failure).toMatchObject({ reason: "Error", exitCode: 3 });
    expect((await stepRunEvents(again.runId)).map((x) => x.type)).toEqual(["ephemera.steprun.started.v1", "ephemera.steprun.failed.v1"]);
  });

  it("records a run that a lost runner started as RunnerLost without running it", async () => {
    const wf = workflowId("rke", "db", "create");
    const run = makeRunId(wf, "provision", 1);
    await append(Aggregates.steprun, run, ev("ephemera.steprun.started.v1", { runId: run, workflowId: wf, step: "provision", attempt: 1, runner: "gone-1" }));
    await dispatch("rke", "provision", { "db-name": "orders", config: "1" });
    const e = await result(run);
    expect(e.type === "ephemera.steprun.failed.v1" && e.data.failure).toMatchObject({ reason: "RunnerLost", message: expect.stringContaining("gone-1") });
    expect(existsSync(join(scratchDir, "count-rke"))).toBe(false);
  });

  const started = (routingKey: string) => waitFor(() => existsSync(join(scratchDir, `${routingKey}.started`)), {
    timeoutMs: 30_000, what: `the ${routingKey} step to be running`,
  });

  it("stops a running step when it is cancelled, letting its script clean up, and records Cancelled", async () => {
    const d = await dispatch("rkf", "hang");
    await started("rkf");
    expect(processesOf(d.runId).length).toBeGreaterThan(0);
    await queue.cancel("local", { id: "cancel-1", body: pb.StepCancel.toJSON({ runIds: [d.runId], reason: "sandbox deleted" }) });
    const e = await result(d.runId);
    expect(e.type === "ephemera.steprun.failed.v1" && e.data.failure).toMatchObject({
      reason: "Cancelled", message: expect.stringContaining("sandbox deleted"), logTail: expect.stringContaining("stopping on TERM"),
    });
    expect(processesOf(d.runId)).toEqual([]);
    // The run leaves the runner's list once its result is recorded (just after, not with it).
    await waitFor(() => !runner.running().includes(d.runId), { timeoutMs: 10_000, what: "the cancelled run to leave the runner's list" });
  });

  it("joins a delivery of a run that is running here instead of declaring it lost", async () => {
    const d = await dispatch("rki", "hang");
    await started("rki");
    await queue.publish("local", `${d.runId}-again`, d);
    await waitFor(() => received.filter((r) => r === d.runId).length === 2, { what: "the second delivery" });
    await queue.cancel("local", { id: "cancel-2", body: pb.StepCancel.toJSON({ runIds: [d.runId], reason: "test" }) });
    await waitFor(() => handled.filter((r) => r === d.runId).length === 2, { what: "both deliveries to be handled" });
    expect((await stepRunEvents(d.runId)).map((e) => e.type === "ephemera.steprun.failed.v1" ? e.data.failure?.reason : e.type))
      .toEqual(["ephemera.steprun.started.v1", "Cancelled"]);
  });

  it("never starts a run cancelled while its dispatch was still queued", async () => {
    const run = makeRunId(workflowId("rkg", "db", "create"), "provision", 1);
    await queue.cancel("local", { id: "cancel-3", body: pb.StepCancel.toJSON({ runIds: [run], reason: "sandbox deleted" }) });
    await dispatch("rkg", "provision", { "db-name": "orders", config: "1" });
    const e = await result(run);
    expect(e.type === "ephemera.steprun.failed.v1" && e.data.failure).toMatchObject({ reason: "Cancelled" });
    expect(existsSync(join(scratchDir, "count-rkg"))).toBe(false);
  });

  it("on shutdown, kills a step that outlives the grace period (even one ignoring SIGTERM and leaving its session) and records RunnerLost", async () => {
    const d = await dispatch("rkh", "stubborn");
    await started("rkh");
    await runner.stop();
    const e = await result(d.runId, 1000); // recorded before stop() returned
    expect(e.type === "ephemera.steprun.failed.v1" && e.data.failure).toMatchObject({ reason: "RunnerLost", message: expect.stringContaining("shut down") });
    expect(processesOf(d.runId)).toEqual([]);
    await waitFor(() => handled.includes(d.runId), { what: "the dispatch to be acknowledged" });
  });

  it("takes its steps down with it when the runner process dies", async () => {
    const crashed = spawn(process.execPath, [join(ROOT, "services/runner/dist/main.js")], {
      stdio: "ignore",
      env: {
        PATH: process.env["PATH"], NATS_URL: process.env["NATS_URL"] ?? "nats://127.0.0.1:4222", EPHEMERA_PREFIX: prefix,
        EPHEMERA_CLUSTER: "crash", EPHEMERA_IOCONTEXT_ADDR: `127.0.0.1:${io.port}`, EPHEMERA_RUNNER_LISTEN: "127.0.0.1:0", EPHEMERA_METRICS_LISTEN: "127.0.0.1:0",
        EPHEMERA_RUNNER_WORKDIR: join(workdir, "crash"),
        // Its step writes a marker to the shared scratch directory on the host.
        EPHEMERA_STEP_HOST_READONLY: "false",
        // Killed below, with no runner of its prefix started after it: a network pool would be left behind.
        EPHEMERA_STEP_NETWORK: "none",
        EPHEMERA_SIGNING_KEY: TEST_KEY_SECRET,
      },
    });
    try {
      const d = await dispatch("rkj", "stubborn", {}, "crash");
      await started("rkj");
      expect(processesOf(d.runId).length).toBeGreaterThan(0);
      crashed.kill("SIGKILL");
      await waitFor(() => processesOf(d.runId).length === 0, { what: "the step's processes to end with their runner" });
      expect((await stepRunEvents(d.runId)).map((e) => e.type)).toEqual(["ephemera.steprun.started.v1"]);
    } finally {
      crashed.kill("SIGKILL");
    }
  });

  describe("two runners of one cluster, whose work queue redelivers after 1 s without a heartbeat", () => {
    const CLUSTER = "pair";
    let pair: RunningRunner[];
    /** Per runner: the dispatches it was handed and those it finished handling. */
    let receivedBy: Map<string, string[]>;
    let handledBy: Map<string, string[]>;
    /** Per runner: the times it found a run held by another runner's live claim. */
    let foundHeld: Map<string, number>;
    beforeEach(() => {
      pair = [];
      receivedBy = new Map();
      handledBy = new Map();
      foundHeld = new Map();
    });
    afterEach(async () => {
      for (const r of pair) await r.stop();
    });

    const startPaired = async (runnerId: string, more: Partial<RunnerConfig>) => {
      const jsQueue = await JetStreamWorkQueue.open(nc, prefix, dispatchCodec, { ackWaitMs: 1000 });
      const seen = (m: Map<string, string[]>, run: string) => m.set(runnerId, [...(m.get(runnerId) ?? []), run]);
      const watchedQueue: WorkQueue<pb.StepDispatch> = {
        publish: (c, id, d) => jsQueue.publish(c, id, d),
        consume: (c, o, h) => jsQueue.consume(c, o, async (item) => {
          seen(receivedBy, item.data.runId);
          await h(item);
          seen(handledBy, item.data.runId);
        }),
        cancel: (c, m) => jsQueue.cancel(c, m),
        onCancel: (c, h) => jsQueue.onCancel(c, h),
      };
      const watchedClaims: ClaimStore = {
        read: (id) => claims.read(id),
        acquire: async (id, holder, ttlMs, options) => {
          const got = await claims.acquire(id, holder, ttlMs, options);
          if (!got.taken) foundHeld.set(runnerId, (foundHeld.get(runnerId) ?? 0) + 1);
          return got;
        },
        renew: (c, ttlMs) => claims.renew(c, ttlMs),
        release: (c) => claims.release(c),
      };
      const r = await start({
        natsUrl: "", prefix, cluster: CLUSTER, concurrency: 1, driver: "process", iocontextAddr: `127.0.0.1:${io.port}`,
        workdir: await mkdtemp(join(workdir, `${runnerId}-`)), listen: "127.0.0.1:0", runnerId, launcher: LAUNCHER,
        hostEnv: { PATH: process.env["PATH"] ?? "/usr/bin:/bin" }, stepNetwork: "host", cancelGraceMs: 500, shutdownGraceMs: 0, ...more,
      }, { store, queue: watchedQueue, logs, claims: watchedClaims, logger: createLogger("test", "silent"), signingKey: TEST_KEY, values });
      pair.push(r);
      return r;
    };
    const release = (routingKey: string) => writeFile(join(scratchDir, `${routingKey}.go`), "");

    it("leaves a run alone that another runner still runs when its dispatch is redelivered, and the step runs once", async () => {
      // Runner A's heartbeat never comes within the ack wait: its item goes to B while A runs the step.
      await startPaired("runner-a", { heartbeatMs: 60_000, claimTtlMs: 120_000 });
      const d = await dispatch("rkp", "hold", {}, CLUSTER);
      await started("rkp");
      await startPaired("runner-b", { heartbeatMs: 200 });
      // Barrier: B has been handed the run and found A's claim live.
      await waitFor(() => (foundHeld.get("runner-b") ?? 0) > 0, { timeoutMs: 20_000, what: "runner B to find the run held by A" });
      expect(receivedBy.get("runner-b")).toEqual([d.runId]);
      await release("rkp");
      const e = await result(d.runId);
      expect(e.type).toBe("ephemera.steprun.succeeded.v1");
      await waitFor(() => handledBy.get("runner-b")?.includes(d.runId), { timeoutMs: 20_000, what: "B to be done with the delivery it held" });
      expect((await stepRunEvents(d.runId)).map((x) => x.type)).toEqual(["ephemera.steprun.started.v1", "ephemera.steprun.succeeded.v1"]);
      expect(await readFile(join(scratchDir, "count-rkp"), "utf8")).toBe("ran\n");
      expect(await claims.read(d.runId)).toBeUndefined();
    });

    it("declares a run lost once, when the claim of the runner that stopped renewing it has expired", async () => {
      // A renews neither its item nor its claim (3 s) in time: to the others it is a runner that died running the step.
      await startPaired("runner-a", { heartbeatMs: 60_000, claimTtlMs: 3_000 });
      const d = await dispatch("rkq", "hold", {}, CLUSTER);
      await started("rkq");
      const held = await claims.read(d.runId);
      expect(held).toMatchObject({ holder: "runner-a" });
      await startPaired("runner-b", { heartbeatMs: 200 });
      const e = await result(d.runId);
      expect(e.type === "ephemera.steprun.failed.v1" && e.data.failure).toMatchObject({ reason: "RunnerLost", message: expect.stringContaining("runner-a") });
      // B waited for the claim: found it held first, and recorded the loss only after it expired.
      expect(foundHeld.get("runner-b")).toBeGreaterThan(0);
      const lost = (await store.read(Aggregates.steprun, d.runId)).events.at(-1)!;
      expect(Date.parse(lost.time)).toBeGreaterThanOrEqual(held!.until);
      // A's step ends later; its result comes after the loss and changes nothing.
      await release("rkq");
      await waitFor(() => handledBy.get("runner-a")?.includes(d.runId), { timeoutMs: 20_000, what: "A to be done with the run" });
      expect((await stepRunEvents(d.runId)).map((x) => x.type === "ephemera.steprun.failed.v1" ? x.data.failure?.reason : x.type))
        .toEqual(["ephemera.steprun.started.v1", "RunnerLost"]);
      expect(await readFile(join(scratchDir, "count-rkq"), "utf8")).toBe("ran\n");
    });
  });
});
