// ephemera as an operator scales it: a three-node JetStream cluster on loopback (streams and
// buckets at three replicas), and two replicas of every service: two `pnpm start` with one
// EPHEMERA_PREFIX and different ports. Sandboxes of a three-step plugin run while one whole
// replica is SIGKILLed and one NATS node is killed and started again; then every sandbox is
// ready and deleted, no step completed twice, the TTL and the step timeout fired once, and
// every workflow ended. Steps mark their start and completion in files (fixtures/).
// Steps run as an installed ephemera runs them: the Kubernetes driver's pods, on a simulated
// cluster (kube-sim) that outlives the replica, reaching the IO context through one address in
// front of both replicas' (as a Service). A pod whose runner dies is followed by the next
// runner, never started again; the process driver cannot give that (docs/architecture.md, Limits).
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";
import { connectNats, JetStreamEventStore, type RecordedEvent, type Subscription } from "@ephemera/eventstore";
import { DeadlineError, waitFor } from "@ephemera/kit";
import { ephOk } from "../support/eph.js";
import { natsClusterUnavailable, startNatsCluster, type NatsCluster } from "../support/nats-cluster.js";
import { startOwnRedis, type OwnServer } from "../support/own-servers.js";
import { uniquePrefix } from "../support/servers.js";
import { serviceEnv } from "../support/services.js";
import { freePort } from "../support/stack.js";
import { startSim, type Sim } from "../support/kube.js";
import { tcpService, type TcpService } from "../support/tcp-service.js";
import { Replica } from "./replica.js";

const FIXTURES = join(__dirname, "fixtures");
const CREATE_STEPS = ["prepare", "slow", "verify"];
/** Sandboxes of the batch besides the one that checks read-your-writes, the one that times out and the one with a TTL. */
const PLAIN = 5;
const SUITE_MS = 300_000;

interface Doc { name: string; routingKey: string; status: { ready: boolean; reason: string; message: string } }
interface Mark { sandbox: string; runId: string; step: string }
interface Failure { reason?: string }

const cannotRun = natsClusterUnavailable();
const describeCluster = cannotRun === undefined ? describe : (title: string) => {
  console.log(`${title}: not run: ${cannotRun}`);
  it.skip(`${title} (${cannotRun})`, () => undefined);
};

/** `<sandbox> <run id>` lines; a run id is `<routingKey>.<resource>.<phase>.<step>.<attempt>`. */
function readMarks(file: string): Mark[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8").split("\n").filter((l) => l.trim()).map((l) => {
    const [sandbox = "", runId = ""] = l.trim().split(" ");
    return { sandbox, runId, step: runId.split(".").slice(0, -1).join(".") };
  });
}

const countBy = <T>(items: T[], key: (t: T) => string) => {
  const m = new Map<string, number>();
  for (const i of items) m.set(key(i), (m.get(key(i)) ?? 0) + 1);
  return m;
};

describeCluster("two replicas of every service on a three-node JetStream cluster", () => {
  const prefix = uniquePrefix("cluster");
  // Not under /tmp: every step gets a private /tmp, and the marks are shared with the test.
  const scratch = mkdtempSync(`/var/tmp/ephemera-${prefix}-`);
  const marks = join(scratch, "marks");
  const gates = join(marks, "gates");
  let nats: NatsCluster;
  let redis: OwnServer & { url: string };
  let sim: Sim;
  let iocontext: TcpService;
  let a: Replica;
  let b: Replica;
  let nc: NatsConnection | undefined;
  let store: JetStreamEventStore;
  let follower: Subscription | undefined;
  /** Every event of the prefix, as the test's follower has read them (it may lag a failover: see caughtUp()). */
  const events: RecordedEvent[] = [];
  let followed = 0;

  beforeAll(async () => {
    // Steps run as an unprivileged user: they must reach and write the marks.
    mkdirSync(gates, { recursive: true });
    chmodSync(scratch, 0o711);
    for (const d of [marks, gates]) chmodSync(d, 0o1777);
    nats = await startNatsCluster(join(scratch, "nats"));
    await nats.ready(30_000);
    redis = await startOwnRedis(join(scratch, "redis"));
    // The marks are files on the host, shared with the test: the host stays writable to pods.
    sim = await startSim({ EPHEMERA_STEP_HOST_READONLY: "false" });
    const io = { A: await freePort(), B: await freePort() };
    iocontext = await tcpService([`127.0.0.1:${io.A}`, `127.0.0.1:${io.B}`]);
    const replica = async (name: "A" | "B") => {
      const api = await freePort();
      return new Replica(name, `127.0.0.1:${api}`, serviceEnv({
        NATS_URL: nats.url, REDIS_URL: redis.url, EPHEMERA_PREFIX: prefix, EPHEMERA_STREAM_REPLICAS: "3",
        EPHEMERA_API_LISTEN: `127.0.0.1:${api}`, EPHEMERA_IOCONTEXT_LISTEN: `127.0.0.1:${io[name]}`,
        EPHEMERA_RUNNER_DRIVER: "kubernetes", KUBECONFIG: sim.kubeconfig, EPHEMERA_KUBE_NAMESPACE: "default",
        EPHEMERA_POD_IOCONTEXT: iocontext.address,
        // Every other listener on a port picked at start: two replicas on one machine never clash.
        EPHEMERA_WEBHOOK_LISTEN: "127.0.0.1:0",
        EPHEMERA_RUNNER_WORKDIR: join(scratch, `runs-${name}`),
        // Faults, not load: enough steps at once on each replica for the kill to hit several.
        EPHEMERA_RUNNER_CONCURRENCY: "4",
        EPHEMERA_LOG_FORMAT: "json", LOG_LEVEL: "info",
        // Two stacks starting at once on two busy cores, on a cluster that elects a leader per stream.
        EPHEMERA_STACK_READY_TIMEOUT_MS: "120000",
      }));
    };
    [a, b] = [await replica("A"), await replica("B")];
    await Promise.all([a.start(150_000), b.start(150_000)]);
    await ephOk(a.eph, ["plugin", "apply", "-f", join(FIXTURES, "steps-plugin.yaml")]);
    // The test's own reader, on the nodes in another order than the services: it stays up while n1 is down.
    nc = await connectNats([...nats.nodes].reverse().map((n) => n.url).join(","), "cluster-test");
    store = await JetStreamEventStore.open(nc, { prefix, replicas: 3 });
    follower = store.follow({}, (c) => {
      events.push(...c.events);
      followed = c.position;
    });
  }, 240_000);

  /** Waits until the follower has read every commit appended so far. */
  async function caughtUp(timeoutMs: number): Promise<void> {
    const end = await store.position();
    await waitFor(() => followed >= end, { timeoutMs, intervalMs: 100, what: `the test's follower to read up to position ${end} (at ${followed})` });
  }

  afterAll(async () => {
    // EPHEMERA_KEEP_LOGS=DIR: every line of both replicas and the NATS nodes, to read after a failure.
    const keep = process.env["EPHEMERA_KEEP_LOGS"];
    if (keep) {
      mkdirSync(keep, { recursive: true });
      for (const r of [a, b]) if (r) writeFileSync(join(keep, `replica-${r.name}.log`), r.log.lines().map((l) => l.line).join("\n"));
      for (const [i, n] of (nats?.nodes ?? []).entries()) writeFileSync(join(keep, `nats-n${i + 1}.log`), n.tail(500));
    }
    await follower?.stop().catch(() => undefined);
    await nc?.close().catch(() => undefined);
    for (const r of [a, b]) await r?.stop().catch(() => undefined);
    await iocontext?.close().catch(() => undefined);
    await sim?.stop().catch(() => undefined);
    await redis?.stop().catch(() => undefined);
    await nats?.stop().catch(() => undefined);
    rmSync(scratch, { recursive: true, force: true });
  }, 60_000);

  /** The workflow id of a `workflow` aggregate's event is its subject; DeadlineExceeded failures of a step. */
  const deadlineFailure = (e: RecordedEvent) =>
    (e.type === "ephemera.workflow.step_retry_scheduled.v1" || e.type === "ephemera.workflow.step_failed.v1") &&
    ((e.data as { failure?: Failure }).failure?.reason === "DeadlineExceeded");

  const apply = (via: Replica, name: string, file = "sandbox.yaml", hang = "no") =>
    ephOk(via.eph, ["sandbox", "apply", "-f", join(FIXTURES, file), "--set", `name=${name}`, "--set", `marks=${marks}`,
      ...(file === "sandbox.yaml" ? ["--set", `hang=${hang}`] : []), "--wait=false"]);
  const list = async (via: Replica) => JSON.parse((await ephOk(via.eph, ["sandbox", "list", "-o", "json"], { timeoutMs: 15_000 })).stdout) as Doc[];

  it("serves one set of sandboxes through both replicas, and keeps every sandbox, step, TTL and timeout right through the loss of a replica and a NATS node", async () => {
    const suiteStart = Date.now();
    const timeline: string[] = [];
    const note = (line: string) => timeline.push(`+${((Date.now() - suiteStart) / 1000).toFixed(1)}s ${line}`);
    const problems: string[] = [];
    const left = (reserveMs: number) => Math.max(5_000, suiteStart + SUITE_MS - reserveMs - Date.now());

    // Every stream and bucket of the prefix at three replicas.
    const jsm = await jetstreamManager(nc!);
    const streams = (await jsm.streams.list().next()).filter((s) => s.config.name.includes(prefix));
    expect(streams.length).toBeGreaterThan(0);
    expect(streams.filter((s) => s.config.num_replicas !== 3).map((s) => `${s.config.name}: R${s.config.num_replicas}`)).toEqual([]);

    // Read-your-writes: created through A, read at once through B.
    await apply(a, "ryw");
    const read = await b.eph(["sandbox", "get", "ryw", "-o", "json"]);
    expect({ code: read.code, stderr: read.stderr.trim() }).toEqual({ code: 0, stderr: "" });
    note("ryw created through A, read through B");

    const plain = Array.from({ length: PLAIN }, (_, i) => `c${i + 1}`);
    await Promise.all(plain.map((name, i) => apply(i % 2 ? b : a, name)));
    await apply(b, "hang", "sandbox.yaml", "yes");
    await apply(a, "ttl", "ttl-sandbox.yaml");
    const lasting = ["ryw", ...plain, "hang"];
    const all = [...lasting, "ttl"];
    note(`applied ${all.join(", ")}`);

    // The hanging step is let through once a timeout of it is recorded, whichever attempt that was (one whose
    // runner is killed ends RunnerLost, and the next hangs). Read from the workflow's own events each time: a
    // follower can lag a NATS failover by longer than the step's retry.
    const gateWatch = waitFor(async () => {
      const run = readMarks(join(marks, "started")).find((m) => m.sandbox === "hang" && m.runId.includes(".slow."));
      const workflow = run?.step.split(".").slice(0, -1).join(".");
      if (!workflow) return false;
      const { events: recorded } = await store.read("workflow", workflow).catch(() => ({ events: [] as RecordedEvent[] }));
      if (!recorded.some(deadlineFailure)) return false;
      writeFileSync(join(gates, workflow), "");
      note(`timeout of ${workflow} recorded: its gate opened`);
      return true;
    }, { timeoutMs: left(60_000), intervalMs: 250, what: "a timeout of the hanging step" }).catch((err: unknown) => { problems.push((err as Error).message); });

    // The faults land while create steps run, the step that times out among them.
    const running = () => {
      const done = new Set(readMarks(join(marks, "completed")).map((m) => m.runId));
      return readMarks(join(marks, "started")).filter((m) => !done.has(m.runId));
    };
    await waitFor(() => { const now = running(); return now.some((m) => m.sandbox === "hang" && m.runId.includes(".slow.")) && now.length >= 2; },
      { timeoutMs: 60_000, intervalMs: 50, what: "the step that times out and another step running" });
    note(`steps running: ${running().map((m) => m.runId).join(", ")}`);
    const killedPid = a.pid;
    await a.kill();
    note(`replica A (process group ${killedPid}) SIGKILLed`);
    const node = nats.nodes[0]!;
    const completedBefore = readMarks(join(marks, "completed")).length;
    await node.stop("SIGKILL");
    note(`NATS node n1 (${node.url}) SIGKILLed`);
    // Back once the two left answer JetStream requests and a step has completed without it.
    await nats.ready(30_000);
    await waitFor(() => readMarks(join(marks, "completed")).length > completedBefore,
      { timeoutMs: 60_000, intervalMs: 100, what: "a step to complete while NATS node n1 is down" });
    note("a step completed with n1 down");
    await node.start();
    await nats.ready(30_000);
    note("NATS node n1 started again, JetStream answers through all three");

    // Every sandbox that lasts ready, the one with a TTL deleted by it, as B sees them.
    let last = new Map<string, Doc>();
    const settled = async (want: (docs: Map<string, Doc>) => boolean, what: string, timeoutMs: number) => {
      try {
        await waitFor(async () => {
          try {
            last = new Map((await list(b)).map((d) => [d.name, d]));
          } catch {
            return false;
          }
          return want(last);
        }, { timeoutMs, intervalMs: 1_000, what });
      } catch (err) {
        if (!(err instanceof DeadlineError)) throw err;
        problems.push(`${what}: not within ${Math.round(timeoutMs / 1000)} s; as B lists them: ${
          [...last.values()].map((d) => `${d.name} ${d.status.ready ? "Ready" : `${d.status.reason} (${d.status.message})`}`).join("; ") || "none"}`);
      }
    };
    // Settled once each is ready or has failed (then it never will be): a failure is reported below, not waited out.
    await settled((d) => lasting.every((n) => d.get(n)?.status.ready || d.get(n)?.status.reason === "ResourceFailed") && !d.has("ttl"),
      "every sandbox settled and the one with a TTL deleted by it", left(90_000));
    const notReady = lasting.filter((n) => !last.get(n)?.status.ready);
    for (const n of notReady.filter((n) => last.has(n))) problems.push(`sandbox ${n} is ${last.get(n)!.status.reason}: ${last.get(n)!.status.message}`);
    note(`settled: ${lasting.length - notReady.length} of ${lasting.length} ready, the TTL's sandbox ${last.has("ttl") ? "still listed" : "gone"}`);
    await gateWatch;

    // Deleted through B (A is gone), until none is listed.
    await Promise.all(lasting.map((n) => ephOk(b.eph, ["sandbox", "delete", n, "--wait=false"])));
    await settled((d) => d.size === 0, "every sandbox deleted", left(40_000));
    note("every sandbox deleted");

    // Every workflow that started has ended (succeeded, failed or cancelled).
    const ends = new Set(["ephemera.workflow.succeeded.v1", "ephemera.workflow.failed.v1", "ephemera.workflow.cancelled.v1"]);
    const unended = () => {
      const started = new Set(events.filter((e) => e.type === "ephemera.workflow.started.v1").map((e) => e.subject));
      for (const e of events) if (ends.has(e.type)) started.delete(e.subject);
      return [...started];
    };
    try {
      await caughtUp(left(30_000));
      await waitFor(() => unended().length === 0, { timeoutMs: left(25_000), intervalMs: 250, what: "every workflow to end" });
    } catch (err) {
      problems.push(`${(err as Error).message}; workflows that never ended: ${unended().join(", ") || "none"}`);
    }

    // What the steps left: each create step of each sandbox, and its delete step, completed exactly once.
    const started = readMarks(join(marks, "started"));
    const completed = readMarks(join(marks, "completed"));
    const perStep = countBy(completed, (m) => `${m.sandbox} ${m.step}`);
    const twice = [...perStep].filter(([, n]) => n > 1);
    for (const [step, n] of twice) problems.push(`step ${step} completed ${n} times: ${completed.filter((m) => `${m.sandbox} ${m.step}` === step).map((m) => m.runId).join(", ")}`);
    for (const sandbox of all) {
      const routingKey = started.find((m) => m.sandbox === sandbox)?.runId.split(".")[0];
      // The TTL may delete its sandbox before its create steps end (they are cancelled then): its delete step runs all the same.
      const steps = sandbox === "ttl" ? [["delete", "teardown"]] as const : [...CREATE_STEPS.map((s) => ["create", s] as const), ["delete", "teardown"] as const];
      for (const [phase, step] of steps) {
        const key = `${sandbox} ${routingKey}.res.${phase}.${step}`;
        if (!perStep.has(key)) problems.push(`sandbox ${sandbox} (${routingKey ?? "no step started"}): its ${phase} step ${step} never completed`);
      }
    }
    const startedTwice = [...countBy(started, (m) => m.runId)].filter(([, n]) => n > 1);
    for (const [runId, n] of startedTwice) problems.push(`attempt ${runId} started ${n} times (one run id, several processes)`);

    // The TTL fired once, the step timeout once.
    const ttlFired = events.filter((e) => e.type === "ephemera.sandbox.deleting.v1" && e.subject === "ttl" && (e.data as { reason?: string }).reason === "ttl");
    if (ttlFired.length !== 1) problems.push(`the TTL of sandbox ttl fired ${ttlFired.length} times (sandbox.deleting with reason ttl), once expected`);
    const timeouts = events.filter(deadlineFailure);
    const hangWorkflows = new Set(events.filter((e) => e.type === "ephemera.workflow.started.v1" && (e.data as { sandbox?: string }).sandbox === "hang").map((e) => e.subject));
    const hangTimeouts = timeouts.filter((e) => hangWorkflows.has(e.subject));
    if (hangTimeouts.length !== 1 || timeouts.length !== 1) {
      problems.push(`the step timeout fired ${hangTimeouts.length} times for sandbox hang (${timeouts.length} in all), once expected`);
    }
    const runnerTimeouts = events.filter((e) => e.type === "ephemera.steprun.failed.v1" && (e.data as { failure?: Failure }).failure?.reason === "DeadlineExceeded").length;
    const lost = events.filter((e) => e.type === "ephemera.steprun.failed.v1" && (e.data as { failure?: Failure }).failure?.reason === "RunnerLost").length;
    // The kill must have hit steps of A's (A and B each run up to 4 of the 7 or more running then): B follows their pods.
    const followedRuns = b.log.lines().filter((l) => l.line.includes("following a run a lost runner started")).length;
    if (followedRuns === 0) problems.push("B followed no pod of a run A had started: the kill hit no step of A's, and proved nothing of them");

    console.info(`cluster: ${lasting.length} sandboxes ready then deleted, ${all.length - lasting.length} deleted by its TTL; ` +
      `attempts started ${started.length}, completed ${completed.length}, steps completed twice ${twice.length}, attempts started twice ${startedTwice.length}; ` +
      `RunnerLost ${lost}; runs of A followed by B ${followedRuns}; TTL fired ${ttlFired.length}; step timeout fired ${hangTimeouts.length} (runner-recorded ${runnerTimeouts}); ` +
      `workflows ${new Set(events.filter((e) => e.type === "ephemera.workflow.started.v1").map((e) => e.subject)).size}, unended ${unended().length}; ` +
      `faults: replica A SIGKILLed, NATS n1 SIGKILLed and restarted; ${Math.round((Date.now() - suiteStart) / 1000)} s\n${timeline.join("\n")}`);
    if (problems.length) {
      const needles = ["hang", "ttl", ...twice.map(([s]) => s.split(" ")[1]!), ...startedTwice.map(([r]) => r)];
      throw new Error(`${problems.length} problem(s):\n${problems.map((p, i) => `(${i + 1}) ${p}`).join("\n")}\n\ntimeline:\n${timeline.join("\n")}\n\n` +
        `B's warnings and errors:\n${b.problems(30)}\n\nA's lines about them:\n${a.grep(needles, 20)}`);
    }
  }, SUITE_MS + 30_000);
});
