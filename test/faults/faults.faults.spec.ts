// The fault suite: ephemera's services, its NATS and its Redis are killed, restarted and
// flushed while step scripts run, and every sandbox must still end where it should (ready
// after create, gone after delete), with no step attempt run twice, delete steps given the
// create outputs, and no process left behind. Scenarios run in order on one stack: each
// creates a batch while a batch of ready sandboxes is being deleted, and injects its fault
// while steps of both are running, so every fault hits create and delete steps.
import { FaultStack, Problems, clock, type Batch, type OngoingFault } from "./fault-stack.js";

const BATCH_SIZE = 3;
/** Everything in this file, start to stop, fits in this (the suite is bounded: ≤ 4.5 min with the build). */
const SUITE_BUDGET_MS = 262_000;
const STOP_RESERVE_MS = 15_000;

interface Scenario {
  title: string;
  /** What a run takes when the services behave; kept free for the scenarios after this one. */
  normalMs: number;
  /** The most this scenario may take. */
  maxMs: number;
  /** Injects the fault and restores the system; returns what it did, for the timeline. */
  fault?: (stack: FaultStack) => Promise<string>;
  /**
   * A fault that lasts until the sandboxes settle: started once a create step of this
   * scenario's batch runs, before the other batch's deletion is asked for, so it hits
   * create and delete steps from their start to their end ("overlap" scenarios only).
   */
  ongoing?: (stack: FaultStack) => OngoingFault;
  /**
   * "overlap": the fault hits while a create step of this scenario's batch and a delete
   * step of the batch being deleted run. "between": while a step that reads another step's
   * output runs, and before the other batch is deleted (its delete steps then read create
   * outputs Redis lost).
   */
  when?: "overlap" | "between";
}

const SCENARIOS: Scenario[] = [
  { title: "baseline: create and delete with no fault", normalMs: 14_000, maxMs: 40_000 },
  { title: "SIGKILL of the scheduler while steps run, then restart", normalMs: 15_000, maxMs: 45_000, fault: (s) => s.killAndRestart("scheduler") },
  { title: "SIGKILL of the sandbox service while steps run, then restart", normalMs: 15_000, maxMs: 45_000, fault: (s) => s.killAndRestart("sandbox") },
  { title: "SIGKILL of the IO context while steps run, then restart", normalMs: 15_000, maxMs: 45_000, fault: (s) => s.killAndRestart("iocontext") },
  // Longer than a step: calls of steps that start or end meanwhile are retried until it is back.
  { title: "IO context killed for 8 s while steps run, then restarted", normalMs: 28_000, maxMs: 55_000, fault: (s) => s.killFor("iocontext", 8_000) },
  // The runner's dispatches come back only after the work queue's ack wait (30 s).
  { title: "SIGKILL of the runner while steps run, then restart", normalMs: 45_000, maxMs: 70_000, fault: (s) => s.killAndRestart("runner") },
  { title: "restart of nats-server (same port, same store) while steps run", normalMs: 16_000, maxMs: 45_000, fault: (s) => s.restartNats() },
  { title: "FLUSHALL on Redis between create and delete, while a step that reads another's output runs", normalMs: 14_000, maxMs: 40_000, fault: (s) => s.flushRedis(), when: "between" },
  { title: "Redis stopped for 20 s while steps run, then started again", normalMs: 34_000, maxMs: 60_000, fault: (s) => s.redisOutage(20_000) },
  { title: "Redis flushed every 100 ms while steps run", normalMs: 14_000, maxMs: 40_000, ongoing: (s) => s.flushRedisEvery(100) },
];
const DRAIN = { normalMs: 10_000, maxMs: 30_000 };

describe("ephemera under faults (own NATS and Redis, services as processes)", () => {
  let stack: FaultStack;
  let suiteStart = 0;
  let counter = 0;
  /** Ready sandboxes, to be deleted while the next fault hits. */
  let toDelete: Batch | undefined;
  /** Created batches that did not all become ready: deleted at the end. */
  const notDeleted: Batch[] = [];

  /** This step's deadline: its own maximum, but never eating the time the steps after it normally need. */
  const deadline = (maxMs: number, laterNormalMs: number) =>
    Math.max(Date.now() + 5_000, Math.min(Date.now() + maxMs, suiteStart + SUITE_BUDGET_MS - STOP_RESERVE_MS - laterNormalMs));
  const left = (until: number) => Math.max(1_000, until - Date.now());

  /**
   * The batch the next fault deletes: the last scenario's when all of it became ready,
   * else a fresh one created (with no fault) for the purpose, so that every fault hits
   * delete steps that have every create output to read.
   */
  async function batchToDelete(until: number, problems: Problems, note: (l: string) => void): Promise<Batch | undefined> {
    if (toDelete) return toDelete;
    const spare = stack.newBatch(`s${++counter}`, BATCH_SIZE);
    await stack.apply(spare);
    notDeleted.push(spare);
    note(`applied ${spare.sandboxes.map((s) => `${s.name} (${s.routingKey})`).join(", ")} (to be deleted under the fault)`);
    const found = new Problems();
    await stack.settle({ ready: spare }, left(until), found, Date.now());
    if (found.items.length) {
      problems.add(`before any fault, sandboxes to delete under it did not become ready:\n${found.items.join("\n")}`);
      return undefined;
    }
    notDeleted.splice(notDeleted.indexOf(spare), 1);
    return (toDelete = spare);
  }

  beforeAll(async () => {
    suiteStart = Date.now();
    stack = await FaultStack.start();
  }, 60_000);

  afterAll(async () => {
    await stack?.stop();
  }, 60_000);

  SCENARIOS.forEach((scenario, index) => {
    const laterNormalMs = SCENARIOS.slice(index + 1).reduce((n, s) => n + s.normalMs, 0) + DRAIN.normalMs;
    it(scenario.title, async () => {
      const until = deadline(scenario.maxMs, laterNormalMs);
      const since = Date.now();
      const timeline: string[] = [];
      const note = (line: string) => timeline.push(`${clock(Date.now())} ${line}`);
      const problems = new Problems();
      let faultAt: number | undefined;
      let ongoing: OngoingFault | undefined;
      const faulty = Boolean(scenario.fault ?? scenario.ongoing);
      await stack.services.ready(left(until));
      const del = faulty ? await batchToDelete(until, problems, note) : undefined;

      const batch = stack.newBatch(`f${++counter}`, BATCH_SIZE);
      await stack.apply(batch);
      notDeleted.push(batch);
      note(`applied ${batch.sandboxes.map((s) => `${s.name} (${s.routingKey})`).join(", ")}`);
      const startDelete = async () => {
        if (!del) return;
        // Its teardowns wait, so they are still running when the fault hits.
        await stack.delete(del, undefined, { holdTeardowns: when === "overlap" });
        toDelete = undefined;
        note(`deleting ${del.sandboxes.map((s) => s.name).join(", ")}`);
      };
      const when = scenario.when ?? "overlap";
      // An ongoing fault is stopped however the scenario ends, so it cannot hit the next one.
      try {
        if (!faulty) {
          stack.checkStepProcessesVisible(await stack.stepsRunning([{ batch, phase: "create" }], left(until)), problems);
        } else {
          if (when === "overlap") {
            await stack.stepsRunning([{ batch, phase: "create" }], left(until));
            if (scenario.ongoing) {
              faultAt = Date.now();
              ongoing = scenario.ongoing(stack);
              note(`fault started: ${ongoing.what}`);
            }
            await startDelete();
          }
          const wanted = when === "between"
            ? [{ batch, phase: "create" as const, step: "configure" }]
            : [{ batch, phase: "create" as const }, ...(del ? [{ batch: del, phase: "delete" as const }] : [])];
          const running = await stack.stepsRunning(wanted, Math.min(20_000, left(until)));
          note(`steps running: ${running.map((m) => `${m.runId} (${m.sandbox})`).join(", ")}`);
          if (scenario.fault) {
            faultAt = Date.now();
            note(`fault done: ${await scenario.fault(stack)}`);
          }
          if (when === "between") await startDelete();
        }

        if (del) stack.openTeardowns(del);
        await stack.settle({ ready: batch, ...(del ? { gone: del } : {}) }, left(until), problems, since);
        note("settled (or deadline)");
      } finally {
        if (ongoing) note(`fault stopped: ${await ongoing.stop()}`);
      }
      if (del) stack.checkDeleteOutputs(del, problems);
      stack.checkDuplicates(problems);
      await stack.checkNoStepProcesses(problems);
      stack.checkCrashes(problems, since, faultAt);
      if (batch.sandboxes.every((s) => s.last?.status.ready)) {
        notDeleted.splice(notDeleted.indexOf(batch), 1);
        toDelete = batch;
      }
      // Each service's last lines since the fault, to read what a failure cannot show in the lines about one sandbox.
      if (problems.items.length) for (const service of ["sandbox", "scheduler", "runner", "iocontext"] as const) timeline.push(`${service}, last lines:\n${stack.services.tail(service, 12, since)}`);
      problems.throwIfAny(scenario.title, timeline);
      console.info(`${scenario.title}: passed\n${timeline.join("\n")}`);
    }, scenario.maxMs + 30_000);
  });

  it("deletes what is left; then no sandbox is listed, no step process runs, no attempt ran twice", async () => {
    const until = deadline(DRAIN.maxMs, 0);
    const since = Date.now();
    const problems = new Problems();
    await stack.services.ready(left(until));
    const batches = [...notDeleted, ...(toDelete ? [toDelete] : [])];
    const all: Batch = { label: "the rest", sandboxes: batches.flatMap((b) => b.sandboxes) };
    await stack.delete(all, problems);
    await stack.settle({ gone: all }, left(until), problems, since);
    stack.checkDeleteOutputs(all, problems);
    const remaining = await stack.list();
    if (remaining.length) {
      problems.add(`${remaining.length} sandbox${remaining.length > 1 ? "es are" : " is"} still listed at the end:\n${
        remaining.map((v) => `  ${v.name} (${v.routingKey}) ${v.status.reason}: ${v.status.message}`).join("\n")}`);
    }
    stack.checkDuplicates(problems, true);
    await stack.checkNoStepProcesses(problems);
    stack.checkCrashes(problems, since);
    problems.throwIfAny("at the end of the suite", []);
  }, DRAIN.maxMs + 30_000);

  it("stops: every service exits on SIGTERM and leaves no process behind", async () => {
    const problems = new Problems();
    const ends = await stack.services.stop();
    for (const [service, how] of ends) if (how !== "code 0") problems.add(`service ${service} ended ${how} on SIGTERM\n${stack.services.tail(service, 15)}`);
    await stack.checkNoStepProcesses(problems);
    problems.throwIfAny("stopping the stack", []);
  }, 60_000);
});
