// No service dies of a NATS blip: the test's own nats-server is paused (SIGSTOP, then
// SIGCONT after 1.5 s, 5 s and 30 s) and restarted, idle and while steps run, under the
// four services as processes. No service may exit; each reports NOT_SERVING while NATS
// is gone and SERVING again after; the API answers reads during a pause of 5 s or more;
// work dispatched before and after the fault completes.
import { waitFor } from "@ephemera/kit";
import { HealthWatch, pauseProcess } from "../support/health-watch.js";
import { SERVICE_NAMES } from "../support/services.js";
import { FaultStack, Problems, clock, type Batch } from "./fault-stack.js";

/** From SIGCONT (or the restarted server) to every service SERVING again. */
const RECOVERY_MS = 20_000;
const SETTLE_MS = 40_000;

describe("NATS paused or restarted under the services (own nats-server, services as processes)", () => {
  let stack: FaultStack;
  let watch: HealthWatch;
  let counter = 0;
  const durations: string[] = [];

  beforeAll(async () => {
    stack = await FaultStack.start();
    watch = HealthWatch.start(stack.services);
    await watch.allServing(10_000);
  }, 60_000);

  afterAll(async () => {
    watch?.stop();
    await stack?.stop();
    if (durations.length) process.stdout.write(`NATS blips:\n${durations.map((d) => `  ${d}`).join("\n")}\n`);
  }, 60_000);

  /**
   * Runs `fault` (idle, or while a create step of a batch runs), then checks: no service
   * exited, every one went NOT_SERVING during it (when `degraded`) and is SERVING again,
   * the batch dispatched before the fault and one created after it become ready.
   */
  async function scenario(title: string, fault: () => Promise<{ from: number; to: number }>, { busy, degraded }: { busy: boolean; degraded: boolean }) {
    const started = Date.now();
    const problems = new Problems();
    const timeline: string[] = [];
    const note = (t: string) => timeline.push(`${clock(Date.now())} ${t}`);
    const batch = (label: string): Batch => stack.newBatch(`blip${++counter}-${label}`, 1);
    let before: Batch | undefined;
    if (busy) {
      before = batch("before");
      await stack.apply(before);
      const running = await stack.stepsRunning([{ batch: before, phase: "create" }], 30_000);
      note(`steps running: ${running.map((m) => m.runId).join(", ")}`);
    }
    const { from, to } = await fault();
    note(`${title}: fault from ${clock(from)} to ${clock(to)} (${to - from} ms)`);
    if (degraded) {
      // A fault shorter than the services take to notice it (a restart of 84 ms) ends before
      // any says NOT_SERVING: "SERVING again" counts only once each has said it.
      await waitFor(() => watch.degradedBetween(from).length === SERVICE_NAMES.length, { timeoutMs: 10_000, intervalMs: 50, what: "every service to report NOT_SERVING" })
        .catch(() => undefined); // reported below, with the timeline
    }
    try {
      await watch.allServing(RECOVERY_MS);
      note("every service SERVING again");
    } catch (err) {
      problems.add((err as Error).message);
    }
    const back = Date.now();
    if (degraded) {
      const reported = watch.degradedBetween(from, back);
      const silent = SERVICE_NAMES.filter((s) => !reported.includes(s));
      if (silent.length) problems.add(`${silent.join(", ")} never reported NOT_SERVING while NATS was gone`);
    }
    const after = batch("after");
    await stack.apply(after);
    note(`applied ${after.sandboxes.map((s) => s.name).join(", ")}`);
    if (before) await stack.settle({ ready: before }, SETTLE_MS, problems, started);
    await stack.settle({ ready: after }, SETTLE_MS, problems, started);
    note("settled");
    stack.checkCrashes(problems, started, from);
    if (!stack.nats.running) problems.add("harness: nats-server is not running after the fault");
    durations.push(`${title}: fault ${to - from} ms, SERVING again ${back - to} ms after it, ` +
      `degraded: ${watch.degradedBetween(from, back).join(", ") || "none"}; scenario ${Date.now() - started} ms`);
    if (process.env["BLIPS_VERBOSE"]) process.stdout.write(`${title}\n${stack.services.grep(["NATS", "nats"], { since: from, max: 80 })}\n`);
    problems.throwIfAny(title, [...timeline, ...watch.timeline(started)]);
  }

  /** While NATS is paused, the API still answers reads (from the services' projections). */
  const readDuring = (problems: string[]) => async () => {
    const r = await stack.eph(["sandbox", "list", "-o", "json"], { timeoutMs: 10_000 });
    if (r.code !== 0) problems.push(`eph sandbox list during the pause exited ${r.code}: ${r.stderr.trim()}`);
  };

  const pause = (ms: number) => async () => {
    const pid = stack.nats.pid;
    if (pid === undefined) throw new Error("nats-server is not running");
    const from = Date.now();
    const readProblems: string[] = [];
    await pauseProcess(pid, ms, ms >= 5_000 ? readDuring(readProblems) : undefined);
    if (readProblems.length) throw new Error(readProblems.join("\n"));
    return { from, to: Date.now() };
  };

  const restart = async () => {
    const from = Date.now();
    await stack.restartNats();
    return { from, to: Date.now() };
  };

  // A pause this short may end before the health probe's 1 s deadline: not asked to show.
  test("idle, NATS paused 1.5 s", () => scenario("idle, paused 1.5 s", pause(1_500), { busy: false, degraded: false }), 60_000);

  test("steps running, NATS paused 1.5 s", () => scenario("busy, paused 1.5 s", pause(1_500), { busy: true, degraded: false }), 60_000);

  test("steps running, NATS paused 5 s", () => scenario("busy, paused 5 s", pause(5_000), { busy: true, degraded: true }), 70_000);

  test("idle, NATS paused 5 s", () => scenario("idle, paused 5 s", pause(5_000), { busy: false, degraded: true }), 70_000);

  test("idle, NATS paused 30 s", () => scenario("idle, paused 30 s", pause(30_000), { busy: false, degraded: true }), 90_000);

  test("steps running, NATS paused 30 s", () => scenario("busy, paused 30 s", pause(30_000), { busy: true, degraded: true }), 100_000);

  test("steps running, NATS restarted", () => scenario("busy, restarted", restart, { busy: true, degraded: true }), 70_000);
});
