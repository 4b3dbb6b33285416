// The workflow decider as given-events / when-command / then-events, with no I/O: every
// timer is driven by the `now` a command carries, every event by the time it was appended at.
import * as pb from "@ephemera/proto";
import { ev, type DomainEvent } from "@ephemera/events";
import { ConflictError } from "@ephemera/kit";
import { commandKey, decide, nextDue, workflowDecider, type WorkflowCommand } from "./decide.js";
import { deciderSpec } from "../../../../test/support/decider.js";
import { planSteps } from "./plan.js";
import {
  DEADLINE_GRACE_MS, DEFAULT_POLICY, DEFAULT_STEP_TIMEOUT_MS, INFRA_RETRIES, START_RECORD_DELAY_MS, UNCLAIMED_AFTER_MS, retryDelayMs, type Policy,
} from "./policy.js";
import type { WorkflowState } from "./state.js";

// --- given / when / then -------------------------------------------------------------

const { at, given, stateOf } = deciderSpec(workflowDecider, 0);

const stepsOf = (state: WorkflowState) => (state.status === "none" ? [] : state.steps);
const types = (events: DomainEvent[]) => events.map((e) => e.type.replace(/^ephemera\.workflow\.|\.v1$/g, ""));
const iso = (ms: number) => new Date(ms).toISOString();

// --- fixtures ------------------------------------------------------------------------

const WF = "rk1.db.create";
const T0 = Date.parse("2026-01-01T00:00:00.000Z");
const SEC = 1000;
const TIMEOUT = 60 * SEC;

const step = (name: string, dependsOn: string[] = [], retries = 0): pb.PlannedStep => ({ name, dependsOn, timeoutMs: TIMEOUT, retries });
const plan = (...steps: pb.PlannedStep[]) =>
  pb.WorkflowStarted.fromPartial({ workflowId: WF, routingKey: "rk1", resource: "db", phase: "create", cluster: "local", steps });

/** a → (b, c) → d */
const diamond = plan(step("a"), step("b", ["a"]), step("c", ["a"]), step("d", ["b", "c"]));
const solo = (retries = 0) => plan(step("s", [], retries));

const run = (s: string, attempt = 1) => `${WF}.${s}.${attempt}`;
const startedEv = (p: pb.WorkflowStarted) => ev("ephemera.workflow.started.v1", p);
const dispatched = (s: string, attempt = 1) => ev("ephemera.workflow.step_dispatched.v1", { step: s, runId: run(s, attempt), attempt });
const running = (s: string, attempt = 1) => ev("ephemera.workflow.step_started.v1", { step: s, runId: run(s, attempt), runner: "runner-1" });
const succeeded = (s: string, outputs: pb.OutputRef[] = [], attempt = 1) =>
  ev("ephemera.workflow.step_succeeded.v1", { step: s, runId: run(s, attempt), outputs });
const failure = (s: string, reason = "Error", attempt = 1) =>
  pb.StepFailure.fromPartial({ step: s, runId: run(s, attempt), reason, exitCode: reason === "Error" ? 3 : undefined, message: `${reason}!`, logTail: "boom" });
const stepFailed = (s: string, f: pb.StepFailure, attempt = 1) => ev("ephemera.workflow.step_failed.v1", { step: s, runId: run(s, attempt), failure: f });
const wfFailed = (f: pb.StepFailure) => ev("ephemera.workflow.failed.v1", { failure: f });
const stopRequested = (reason: string, ...runIds: string[]) => ev("ephemera.workflow.run_stop_requested.v1", { runIds, reason });
const retryScheduled = (s: string, f: pb.StepFailure, attempt: number, retryAt: number, infrastructure = false) =>
  ev("ephemera.workflow.step_retry_scheduled.v1", { step: s, runId: run(s, attempt), failure: f, nextAttempt: attempt + 1, retryAt: iso(retryAt), infrastructure });

const start = (p: pb.WorkflowStarted): WorkflowCommand => ({ kind: "start", started: p });
const runStarted = (s: string, attempt = 1): WorkflowCommand => ({ kind: "run-started", step: s, runId: run(s, attempt), runner: "runner-1" });
const ok = (s: string, outputs: pb.OutputRef[] = [], attempt = 1): WorkflowCommand => ({ kind: "record-success", step: s, runId: run(s, attempt), outputs });
const fail = (s: string, f: pb.StepFailure, attempt = 1): WorkflowCommand => ({ kind: "record-failure", step: s, runId: run(s, attempt), failure: f });
const tick: WorkflowCommand = { kind: "tick" };
const cancel: WorkflowCommand = { kind: "cancel", reason: "sandbox deleted" };
const retry: WorkflowCommand = { kind: "retry" };

/** The retry time a decision scheduled, read back from its event. */
function retryAtOf(events: DomainEvent[]): number {
  const e = events.find((x) => x.type === "ephemera.workflow.step_retry_scheduled.v1");
  if (e?.type !== "ephemera.workflow.step_retry_scheduled.v1") throw new Error("no retry scheduled");
  return Date.parse(e.data.retryAt);
}

/** a succeeded; b and c dispatched (queued) at T0. */
const fannedOut = [...at(T0, startedEv(diamond), dispatched("a")), ...at(T0 + SEC, succeeded("a"), dispatched("b"), dispatched("c"))];

// --- planning ------------------------------------------------------------------------

describe("planning", () => {
  const spec = pb.ResourcePluginSpec.fromPartial({
    create: [
      { name: "a", outputs: [{ name: "x", valueFromPath: "/tmp/x" }], timeout: "10m", retries: 2 },
      { name: "b", inputs: [{ name: "x", valueFromStep: { name: "a", output: "x" } }] },
      { name: "c", inputs: [{ name: "x", valueFromStep: { name: "a", output: "x" } }, { name: "y", valueFromStep: { name: "a", output: "y" } }] },
      { name: "d", inputs: [{ name: "p", valueFromStep: { name: "b", output: "y" } }, { name: "q", valueFromStep: { name: "c", output: "z" } }] },
    ],
    delete: [{ name: "z", inputs: [{ name: "x", valueFromStep: { name: "a", output: "x" } }] }],
  });

  it("turns same-phase valueFromStep references into edges (once each), with each step's deadline and retries", () => {
    expect(planSteps(spec, "create")).toEqual([
      { name: "a", dependsOn: [], timeoutMs: 10 * 60_000, retries: 2 },
      { name: "b", dependsOn: ["a"], timeoutMs: DEFAULT_STEP_TIMEOUT_MS, retries: 0 },
      { name: "c", dependsOn: ["a"], timeoutMs: DEFAULT_STEP_TIMEOUT_MS, retries: 0 },
      { name: "d", dependsOn: ["b", "c"], timeoutMs: DEFAULT_STEP_TIMEOUT_MS, retries: 0 },
    ]);
  });

  it("ignores references from delete steps to create steps", () => {
    expect(planSteps(spec, "delete")).toEqual([{ name: "z", dependsOn: [], timeoutMs: DEFAULT_STEP_TIMEOUT_MS, retries: 0 }]);
  });
});

// --- retry policy --------------------------------------------------------------------

describe("retry backoff", () => {
  it("is exponential from one second, capped at five minutes, within ±20 % jitter", () => {
    for (const [failures, base] of [[1, 1000], [2, 2000], [3, 4000], [9, 256_000], [10, 300_000], [30, 300_000]] as const) {
      const d = retryDelayMs(failures, run("s", failures));
      expect(d).toBeGreaterThanOrEqual(base * 0.8);
      expect(d).toBeLessThanOrEqual(base * 1.2);
    }
  });

  it("is deterministic per run id, and jittered across run ids", () => {
    expect(retryDelayMs(1, run("s"))).toBe(retryDelayMs(1, run("s")));
    const delays = new Set(["a", "b", "c", "d", "e", "f"].map((s) => retryDelayMs(1, run(s))));
    expect(delays.size).toBeGreaterThan(1);
  });
});

// --- the decider ---------------------------------------------------------------------

describe("workflow: start", () => {
  it("records the plan and dispatches only the roots, as attempt 1", () => {
    given().when(start(diamond), T0).then(startedEv(diamond), dispatched("a"));
    const roots = plan(step("x"), step("y"), step("z", ["x", "y"]));
    given().when(start(roots), T0).then(startedEv(roots), dispatched("x"), dispatched("y"));
  });

  it("starting again changes nothing", () => {
    given(at(T0, startedEv(diamond), dispatched("a"))).when(start(diamond), T0 + SEC).thenNothing();
    given(at(T0, startedEv(diamond), dispatched("a"))).when(start(solo()), T0 + SEC).thenNothing();
  });

  it("a workflow started with a failure (plugin version missing) fails at once, with no timer", () => {
    const missing = pb.StepFailure.fromPartial({ reason: "PluginVersionMissing", message: "plugin db@1.0.0 is not published" });
    const p = pb.WorkflowStarted.fromPartial({ ...plan(), failure: missing });
    const w = given().when(start(p), T0);
    w.then(startedEv(p), wfFailed(missing));
    expect(stateOf(w.history())).toMatchObject({ status: "failed", failure: missing });
    expect(nextDue(stateOf(w.history()))).toBeUndefined();
  });

  it("a skipped workflow (no steps) succeeds at once with no outputs", () => {
    const p = pb.WorkflowStarted.fromPartial({ ...plan(), skippedReason: "no create step ever started: nothing to delete" });
    given().when(start(p), T0).then(startedEv(p), ev("ephemera.workflow.succeeded.v1", { outputs: [] }));
  });

  it("commands other than start do nothing before the workflow starts", () => {
    for (const c of [runStarted("a"), ok("a"), fail("a", failure("a")), tick, cancel, retry]) given().when(c, T0).thenNothing();
  });
});

describe("workflow: the DAG", () => {
  it("fans out: b and c are dispatched together when a succeeds", () => {
    given(at(T0, startedEv(diamond), dispatched("a")))
      .when(ok("a", [{ key: "x", size: 3 }]), T0 + SEC)
      .then(succeeded("a", [{ key: "x", size: 3 }]), dispatched("b"), dispatched("c"));
  });

  it("joins: d is dispatched only once both b and c succeeded", () => {
    given(fannedOut).when(ok("b"), T0 + 2 * SEC).then(succeeded("b"));
    given(fannedOut, at(T0 + 2 * SEC, succeeded("b"))).when(ok("c"), T0 + 3 * SEC).then(succeeded("c"), dispatched("d"));
  });

  it("succeeds with every step's outputs keyed <step>.<output> when the last step succeeds", () => {
    const history = [
      ...at(T0, startedEv(diamond), dispatched("a")),
      ...at(T0 + SEC, succeeded("a", [{ key: "x", size: 3 }]), dispatched("b"), dispatched("c")),
      ...at(T0 + 2 * SEC, succeeded("b"), succeeded("c", [{ key: "z", size: 1 }, { key: "w", size: 0 }]), dispatched("d")),
    ];
    given(history).when(ok("d", [{ key: "url", size: 20 }]), T0 + 3 * SEC).then(
      succeeded("d", [{ key: "url", size: 20 }]),
      ev("ephemera.workflow.succeeded.v1", { outputs: [{ key: "a.x", size: 3 }, { key: "c.z", size: 1 }, { key: "c.w", size: 0 }, { key: "d.url", size: 20 }] }),
    );
  });

  it("a result for a run that is not the step's current live run changes nothing", () => {
    const queued = at(T0, startedEv(diamond), dispatched("a"));
    given(queued).when({ kind: "record-success", step: "a", runId: "other", outputs: [] }, T0).thenNothing();
    given(queued).when(ok("a", [], 2), T0).thenNothing();
    given(queued).when(fail("a", failure("a"), 2), T0).thenNothing();
    // Repeated: the step already succeeded.
    given(queued, at(T0, succeeded("a"))).when(ok("a"), T0).thenNothing();
    given(queued, at(T0, succeeded("a"))).when(fail("a", failure("a")), T0).thenNothing();
  });

  it("a result for a step the plan does not have is a conflict", () => {
    expect(() => decide(ok("nope"), stateOf(at(T0, startedEv(diamond), dispatched("a"))), T0)).toThrow(ConflictError);
  });
});

describe("workflow: runners taking runs", () => {
  const queued = at(T0, startedEv(diamond), dispatched("a"));

  it("run-started moves the current run from queued to running", () => {
    const w = given(queued).when(runStarted("a"), T0 + 5 * SEC);
    w.then(ev("ephemera.workflow.step_started.v1", { step: "a", runId: run("a"), runner: "runner-1" }));
    expect(stepsOf(stateOf(w.history()))[0]).toMatchObject({ status: "running", since: T0 + 5 * SEC });
  });

  it("a result whose start the workflow has not recorded records it first, in the same decision, at the time the run started", () => {
    const begun = iso(T0 + 2 * SEC);
    const startedAt = (s: string) => ev("ephemera.workflow.step_started.v1", { step: s, runId: run(s), runner: "runner-1", startedAt: begun });
    const w = given(queued).when({ ...ok("a"), started: { runner: "runner-1", at: begun } } as WorkflowCommand, T0 + 3 * SEC);
    w.then(startedAt("a"), succeeded("a"), dispatched("b"), dispatched("c"));
    // A failure too: the run is timed from its start, and retried or failed as a running one is.
    given(at(T0, startedEv(solo()), dispatched("s"))).when({ ...fail("s", failure("s")), started: { runner: "runner-1", at: begun } } as WorkflowCommand, T0 + 3 * SEC)
      .then(startedAt("s"), stepFailed("s", failure("s")), wfFailed(failure("s")));
    // Already running (its start recorded): the result alone.
    given(queued, at(T0 + SEC, running("a"))).when({ ...ok("a"), started: { runner: "runner-1", at: begun } } as WorkflowCommand, T0 + 3 * SEC)
      .then(succeeded("a"), dispatched("b"), dispatched("c"));
  });

  it("a step's start recorded late (started_at) times it from when it began, not from the event", () => {
    const late = at(T0 + 9 * SEC, ev("ephemera.workflow.step_started.v1", { step: "a", runId: run("a"), runner: "runner-1", startedAt: iso(T0 + 2 * SEC) }));
    expect(stepsOf(stateOf([...queued, ...late]))[0]).toMatchObject({ status: "running", since: T0 + 2 * SEC });
  });

  it("run-started for another run, or again, changes nothing", () => {
    given(queued).when(runStarted("a", 2), T0).thenNothing();
    given(queued, at(T0 + SEC, running("a"))).when(runStarted("a"), T0 + 2 * SEC).thenNothing();
  });

  it("a queued run is due to be reported unclaimed UNCLAIMED_AFTER_MS after its dispatch", () => {
    expect(nextDue(stateOf(queued))).toBe(T0 + UNCLAIMED_AFTER_MS);
  });

  it("tick reports a run nobody took once, after UNCLAIMED_AFTER_MS, and not before", () => {
    given(queued).when(tick, T0 + UNCLAIMED_AFTER_MS - 1).thenNothing();
    const w = given(queued).when(tick, T0 + UNCLAIMED_AFTER_MS + 7);
    w.then(ev("ephemera.workflow.step_unclaimed.v1", { step: "a", runId: run("a"), cluster: "local", waitedMs: UNCLAIMED_AFTER_MS + 7 }));
    given(w.history()).when(tick, T0 + 10 * UNCLAIMED_AFTER_MS).thenNothing();
    expect(nextDue(stateOf(w.history()))).toBeUndefined();
    // It may still be taken after all.
    given(w.history()).when(runStarted("a"), T0 + 10 * UNCLAIMED_AFTER_MS).then(running("a"));
  });

  it("a running run is due at its deadline plus the grace period", () => {
    expect(nextDue(stateOf([...queued, ...at(T0 + 5 * SEC, running("a"))]))).toBe(T0 + 5 * SEC + TIMEOUT + DEADLINE_GRACE_MS);
  });

  it("tick past deadline + grace stops the run and fails it as DeadlineExceeded; not a moment before", () => {
    const started = [...queued, ...at(T0 + 5 * SEC, running("a"))];
    const deadline = T0 + 5 * SEC + TIMEOUT + DEADLINE_GRACE_MS;
    given(started).when(tick, deadline - 1).thenNothing();
    const { events } = given(started).when(tick, deadline);
    expect(types(events)).toEqual(["run_stop_requested", "step_failed", "failed"]);
    expect(events[0]).toEqual(stopRequested("deadline exceeded", run("a")));
    const expected = { step: "a", runId: run("a"), reason: "DeadlineExceeded", message: expect.stringContaining("timeout of 60s") };
    expect(events[1]!.data).toEqual({ step: "a", runId: run("a"), failure: expect.objectContaining(expected) });
    expect(events[2]!.data).toEqual({ failure: expect.objectContaining(expected) });
  });

  it("a DeadlineExceeded counts against the step's retries", () => {
    const p = solo(1);
    const started = at(T0, startedEv(p), dispatched("s"), running("s"));
    const deadline = T0 + TIMEOUT + DEADLINE_GRACE_MS;
    const { events } = given(started).when(tick, deadline);
    expect(types(events)).toEqual(["run_stop_requested", "step_retry_scheduled"]);
    expect(events[1]!.data).toMatchObject({ step: "s", runId: run("s"), nextAttempt: 2, infrastructure: false, failure: { reason: "DeadlineExceeded" } });
    expect(retryAtOf(events)).toBe(deadline + retryDelayMs(1, run("s")));
  });

  it("tick with nothing due does nothing, and fires every due timer of the workflow at once", () => {
    const three = plan(step("x"), step("y"), step("z"));
    const h = [...at(T0, startedEv(three), dispatched("x"), dispatched("y"), dispatched("z")), ...at(T0 + SEC, running("z"))];
    given(h).when(tick, T0 + SEC).thenNothing();
    expect(types(given(h).when(tick, T0 + SEC + TIMEOUT + DEADLINE_GRACE_MS).events))
      .toEqual(["step_unclaimed", "step_unclaimed", "run_stop_requested", "step_failed", "run_stop_requested", "failed"]);
  });
});

describe("workflow: retries", () => {
  const p = solo(1);
  const runningS = at(T0, startedEv(p), dispatched("s"), running("s"));
  const T1 = T0 + 10 * SEC;
  const err = failure("s");

  it("a script failure with retries left schedules the next attempt at now + ~1 s backoff", () => {
    const { events } = given(runningS).when(fail("s", err), T1);
    const retryAt = retryAtOf(events);
    expect(events).toEqual([retryScheduled("s", err, 1, retryAt)]);
    expect(retryAt - T1).toBeGreaterThanOrEqual(800);
    expect(retryAt - T1).toBeLessThanOrEqual(1200);
    expect(retryAt - T1).toBe(retryDelayMs(1, run("s")));
  });

  it("decides the same retry time every time for the same input", () => {
    expect(given(runningS).when(fail("s", err), T1).events).toEqual(given(runningS).when(fail("s", err), T1).events);
  });

  it("the retry is the next timer; tick before it does nothing, at or after it dispatches attempt 2", () => {
    const w = given(runningS).when(fail("s", err), T1);
    const retryAt = retryAtOf(w.events);
    const retrying = w.history();
    expect(nextDue(stateOf(retrying))).toBe(retryAt);
    given(retrying).when(tick, retryAt - 1).thenNothing();
    given(retrying).when(tick, retryAt).then(dispatched("s", 2));
    given(retrying).when(tick, retryAt + 60 * SEC).then(ev("ephemera.workflow.step_dispatched.v1", { step: "s", runId: `${WF}.s.2`, attempt: 2 }));
  });

  it("a late result of the failed attempt changes nothing, before or after the next one is dispatched", () => {
    const retrying = given(runningS).when(fail("s", err), T1).history();
    given(retrying).when(ok("s"), T1 + 1).thenNothing();
    given(retrying, at(T1 + 5 * SEC, dispatched("s", 2))).when(ok("s"), T1 + 6 * SEC).thenNothing();
    given(retrying, at(T1 + 5 * SEC, dispatched("s", 2))).when(runStarted("s"), T1 + 6 * SEC).thenNothing();
  });

  it("when retries are exhausted the step fails and so does the workflow", () => {
    const retrying = given(runningS).when(fail("s", err), T1).history();
    const again = [...retrying, ...at(T1 + 2 * SEC, dispatched("s", 2), running("s", 2))];
    const err2 = failure("s", "Error", 2);
    const w = given(again).when(fail("s", err2, 2), T1 + 3 * SEC);
    w.then(stepFailed("s", err2, 2), wfFailed(err2));
    expect(nextDue(stateOf(w.history()))).toBeUndefined();
  });

  it("a step without retries fails at its first script failure", () => {
    const h = at(T0, startedEv(solo(0)), dispatched("s"));
    given(h).when(fail("s", err), T1).then(stepFailed("s", err), wfFailed(err));
  });

  it("a Cancelled run is never retried", () => {
    const h = at(T0, startedEv(solo(3)), dispatched("s"), running("s"));
    const cancelled = failure("s", "Cancelled");
    given(h).when(fail("s", cancelled), T1).then(stepFailed("s", cancelled), wfFailed(cancelled));
  });

  it(`RunnerLost is retried ${INFRA_RETRIES} times with growing backoff, stopping each lost run, then the step fails`, () => {
    let h = at(T0, startedEv(solo(0)), dispatched("s"), running("s"));
    let now = T1;
    for (let attempt = 1; attempt <= INFRA_RETRIES; attempt++) {
      const lost = failure("s", "RunnerLost", attempt);
      const w = given(h).when(fail("s", lost, attempt), now);
      const retryAt = retryAtOf(w.events);
      w.then(stopRequested("declared lost", run("s", attempt)), retryScheduled("s", lost, attempt, retryAt, true));
      const base = 1000 * 2 ** (attempt - 1);
      expect(retryAt - now).toBeGreaterThanOrEqual(base * 0.8);
      expect(retryAt - now).toBeLessThanOrEqual(base * 1.2);
      const t = given(w.history()).when(tick, retryAt);
      t.then(dispatched("s", attempt + 1));
      h = [...t.history(), ...at(retryAt + SEC, running("s", attempt + 1))];
      now = retryAt + 2 * SEC;
    }
    const last = INFRA_RETRIES + 1;
    const lost = failure("s", "RunnerLost", last);
    // The last lost run is told to stop too: it may still be alive somewhere.
    given(h).when(fail("s", lost, last), now).then(stopRequested("declared lost", run("s", last)), stepFailed("s", lost, last), wfFailed(lost));
  });

  it("DriverError is an infrastructure failure too", () => {
    const h = at(T0, startedEv(solo(0)), dispatched("s"));
    const { events } = given(h).when(fail("s", failure("s", "DriverError")), T1);
    expect(types(events)).toEqual(["run_stop_requested", "step_retry_scheduled"]);
    expect(events[1]!.data).toMatchObject({ infrastructure: true, nextAttempt: 2 });
  });

  it("infrastructure failures do not use up the step's script retries", () => {
    const lost = failure("s", "RunnerLost");
    const w = given(runningS).when(fail("s", lost), T1);
    const h = [...w.history(), ...at(retryAtOf(w.events), dispatched("s", 2), running("s", 2))];
    const err2 = failure("s", "Error", 2);
    const { events } = given(h).when(fail("s", err2, 2), T1 + 5 * SEC);
    expect(events).toEqual([retryScheduled("s", err2, 2, T1 + 5 * SEC + retryDelayMs(1, run("s", 2)))]);
  });
});

describe("workflow: failing with other steps live", () => {
  const errB = failure("b");

  it("a failure while another step is queued stops the queued run and fails the workflow", () => {
    const h = [...fannedOut, ...at(T0 + 2 * SEC, running("b"))];
    given(h).when(fail("b", errB), T0 + 3 * SEC).then(stepFailed("b", errB), stopRequested("the workflow failed", run("c")), wfFailed(errB));
  });

  it("a queued run told to stop is stopped once: no second stop request, no unclaimed report", () => {
    const p = plan(step("x"), step("y"), step("z"));
    const h = at(T0, startedEv(p), dispatched("x"), dispatched("y"), dispatched("z"), running("x"), running("y"));
    const errX = failure("x");
    const w = given(h).when(fail("x", errX), T0 + SEC);
    w.then(stepFailed("x", errX), stopRequested("the workflow failed", run("z")));
    // Past the unclaimed wait, y still running: z was stopped, so nothing is reported about it again.
    given(w.history()).when(tick, T0 + 40 * SEC).thenNothing();
    const errY = failure("y");
    given(w.history()).when(fail("y", errY), T0 + 41 * SEC).then(stepFailed("y", errY), wfFailed(errX));
  });

  it("a failure while another step is running waits for it, then fails with the first failure", () => {
    const h = [...fannedOut, ...at(T0 + 2 * SEC, running("b"), running("c"))];
    const w = given(h).when(fail("b", errB), T0 + 3 * SEC);
    w.then(stepFailed("b", errB));
    given(w.history()).when(ok("c"), T0 + 4 * SEC).then(succeeded("c"), wfFailed(errB));
  });

  it("a step failing in a failing workflow is not retried, even with retries left", () => {
    const p = plan(step("a"), step("b", [], 3));
    const h = at(T0, startedEv(p), dispatched("a"), dispatched("b"), running("a"), running("b"));
    const errA = failure("a");
    const w = given(h).when(fail("a", errA), T0 + SEC);
    w.then(stepFailed("a", errA));
    const lost = failure("b", "RunnerLost");
    given(w.history()).when(fail("b", lost), T0 + 2 * SEC).then(stopRequested("declared lost", run("b")), stepFailed("b", lost), wfFailed(errA));
  });

  it("a step waiting to retry is not dispatched once the workflow is failing", () => {
    const p = plan(step("a"), step("b", [], 1), step("c"));
    const h = at(T0, startedEv(p), dispatched("a"), dispatched("b"), dispatched("c"), running("a"), running("b"), running("c"));
    const errB1 = failure("b");
    const w1 = given(h).when(fail("b", errB1), T0 + SEC);
    const retryAt = retryAtOf(w1.events);
    const errA = failure("a");
    const w2 = given(w1.history()).when(fail("a", errA), T0 + SEC);
    w2.then(stepFailed("a", errA));
    given(w2.history()).when(tick, retryAt).thenNothing();
    given(w2.history()).when(ok("c"), retryAt).then(succeeded("c"), wfFailed(errA));
  });

  // Found by this suite (see the report): nextDue keeps returning the retry time of a step the
  // failing workflow will never dispatch, so its timer fires (and does nothing) until c ends.
  it("a failing workflow's next timer is its running step's deadline, not a retry it will not make", () => {
    const p = plan(step("a"), step("b", [], 1), step("c"));
    const h = at(T0, startedEv(p), dispatched("a"), dispatched("b"), dispatched("c"), running("a"), running("b"), running("c"));
    const w1 = given(h).when(fail("b", failure("b")), T0 + SEC);
    const w2 = given(w1.history()).when(fail("a", failure("a")), T0 + SEC);
    expect(nextDue(stateOf(w2.history()))).toBe(T0 + TIMEOUT + DEADLINE_GRACE_MS);
  });
});

describe("workflow: cancel", () => {
  // a succeeded; b running (since T0+2s), c queued.
  const h = [...fannedOut, ...at(T0 + 2 * SEC, running("b"))];
  const T = T0 + 3 * SEC;

  it("cancels the queued step at once, lists both live runs, and waits for the running one", () => {
    const w = given(h).when(cancel, T);
    w.then(ev("ephemera.workflow.cancel_requested.v1", { reason: "sandbox deleted", runIds: [run("b"), run("c")] }));
    const s = stateOf(w.history());
    expect(s.status).toBe("cancelling");
    expect(stepsOf(s).map((x) => [x.name, x.status])).toEqual([["a", "succeeded"], ["b", "running"], ["c", "cancelled"], ["d", "cancelled"]]);
    expect(nextDue(s)).toBe(T0 + 2 * SEC + TIMEOUT + DEADLINE_GRACE_MS);
  });

  it("ends cancelled once the running step ends, however it ends", () => {
    const cancelling = given(h).when(cancel, T).history();
    given(cancelling).when(ok("b"), T + SEC).then(succeeded("b"), ev("ephemera.workflow.cancelled.v1", {}));
    const stopped = failure("b", "Cancelled");
    given(cancelling).when(fail("b", stopped), T + SEC).then(stepFailed("b", stopped), ev("ephemera.workflow.cancelled.v1", {}));
    // A script failure while cancelling is not retried either.
    const p = plan(step("s", [], 3));
    const h2 = given(at(T0, startedEv(p), dispatched("s"), running("s"))).when(cancel, T).history();
    given(h2).when(fail("s", failure("s")), T + SEC).then(stepFailed("s", failure("s")), ev("ephemera.workflow.cancelled.v1", {}));
  });

  it("the cancelled queued run's late result changes nothing", () => {
    const cancelling = given(h).when(cancel, T).history();
    given(cancelling).when(runStarted("c"), T + SEC).thenNothing();
    given(cancelling).when(ok("c"), T + SEC).thenNothing();
  });

  it("with nothing running, it ends cancelled at once", () => {
    given(fannedOut).when(cancel, T).then(
      ev("ephemera.workflow.cancel_requested.v1", { reason: "sandbox deleted", runIds: [run("b"), run("c")] }),
      ev("ephemera.workflow.cancelled.v1", {}),
    );
  });

  it("a step waiting to retry is cancelled at once and never dispatched", () => {
    const w = given(at(T0, startedEv(solo(1)), dispatched("s"))).when(fail("s", failure("s")), T0 + SEC);
    const c = given(w.history()).when(cancel, T0 + SEC);
    c.then(ev("ephemera.workflow.cancel_requested.v1", { reason: "sandbox deleted", runIds: [] }), ev("ephemera.workflow.cancelled.v1", {}));
    given(c.history()).when(tick, retryAtOf(w.events)).thenNothing();
  });

  it("cancelling again, or a finished workflow, changes nothing", () => {
    given(given(h).when(cancel, T).history()).when(cancel, T + SEC).thenNothing();
    const errB = failure("b");
    const failed = given(fannedOut).when(fail("b", errB), T).history();
    expect(stateOf(failed).status).toBe("failed");
    given(failed).when(cancel, T + SEC).thenNothing();
  });
});

describe("workflow: retry after failure", () => {
  // a and c succeeded, b failed at attempt 1; d never ran.
  const errB = failure("b");
  const failedWf = (p = diamond) => given(
    [...at(T0, startedEv(p), dispatched("a")), ...at(T0 + SEC, succeeded("a"), dispatched("b"), dispatched("c"), succeeded("c"))],
  ).when(fail("b", errB), T0 + 2 * SEC).history();

  it("re-dispatches only the steps that did not succeed, as new attempts", () => {
    const failed = failedWf();
    expect(types(failed.map((h) => h.event)).slice(-2)).toEqual(["step_failed", "failed"]);
    const w = given(failed).when(retry, T0 + 60 * SEC);
    w.then(ev("ephemera.workflow.retried.v1", { steps: ["b", "d"] }), dispatched("b", 2));
    const s = stateOf(w.history());
    expect(s.status === "running" && { retried: s.retried, failure: s.failure }).toEqual({ retried: 1, failure: undefined });
    // …and carries on to success from there.
    const w2 = given(w.history()).when(ok("b", [], 2), T0 + 61 * SEC);
    w2.then(succeeded("b", [], 2), dispatched("d"));
    given(w2.history()).when(ok("d"), T0 + 62 * SEC).then(succeeded("d"), ev("ephemera.workflow.succeeded.v1", { outputs: [] }));
  });

  it("gives the retried steps their retries again", () => {
    const p = plan(step("s", [], 1));
    let h = at(T0, startedEv(p), dispatched("s"));
    const w1 = given(h).when(fail("s", failure("s")), T0);
    h = [...w1.history(), ...at(retryAtOf(w1.events), dispatched("s", 2))];
    const w2 = given(h).when(fail("s", failure("s", "Error", 2), 2), T0 + 5 * SEC);
    expect(types(w2.events)).toEqual(["step_failed", "failed"]);
    const r = given(w2.history()).when(retry, T0 + 10 * SEC);
    r.then(ev("ephemera.workflow.retried.v1", { steps: ["s"] }), dispatched("s", 3));
    expect(types(given(r.history()).when(fail("s", failure("s", "Error", 3), 3), T0 + 11 * SEC).events)).toEqual(["step_retry_scheduled"]);
  });

  it("only a failed workflow can be retried", () => {
    given(fannedOut).when(retry, T0 + 5 * SEC).thenNothing();
    const cancelled = given(fannedOut).when(cancel, T0 + 5 * SEC).history();
    expect(stateOf(cancelled).status).toBe("cancelled");
    given(cancelled).when(retry, T0 + 6 * SEC).thenNothing();
    const done = given(at(T0, startedEv(solo()), dispatched("s"))).when(ok("s"), T0 + SEC).history();
    given(done).when(retry, T0 + 2 * SEC).thenNothing();
  });

  // Found by this suite (see the report): a workflow that failed at start (PluginVersionMissing,
  // no plan) has no steps, so a retry finds "every step succeeded" and succeeds with no outputs.
  // It should fail again with its failure, so the sandbox's retried resource fails again too.
  it("retrying a workflow that failed at start (plugin version missing) fails it again, never succeeds", () => {
    const missing = pb.StepFailure.fromPartial({ reason: "PluginVersionMissing", message: "plugin db@1.0.0 is not published" });
    const failedAtStart = given().when(start(pb.WorkflowStarted.fromPartial({ ...plan(), failure: missing })), T0).history();
    const { events } = given(failedAtStart).when(retry, T0 + SEC);
    expect(types(events)).not.toContain("succeeded");
    expect(events.at(-1)).toEqual(wfFailed(missing));
  });
});

describe("workflow: policy", () => {
  const policy: Policy = { unclaimedAfterMs: 5 * SEC, deadlineGraceMs: 0, infraRetries: 0, startRecordDelayMs: 0 };
  const queued = at(T0, startedEv(solo()), dispatched("s"));
  const runningS = [...queued, ...at(T0 + SEC, running("s"))];

  it("the default policy is the documented one", () => {
    expect(DEFAULT_POLICY).toEqual({
      unclaimedAfterMs: UNCLAIMED_AFTER_MS, deadlineGraceMs: DEADLINE_GRACE_MS, infraRetries: INFRA_RETRIES, startRecordDelayMs: START_RECORD_DELAY_MS,
    });
  });

  it("a policy passed in sets the unclaimed wait, the deadline grace and the infrastructure retries", () => {
    expect(nextDue(stateOf(queued), policy)).toBe(T0 + 5 * SEC);
    expect(types(decide(tick, stateOf(queued), T0 + 5 * SEC, policy))).toEqual(["step_unclaimed"]);
    expect(nextDue(stateOf(runningS), policy)).toBe(T0 + SEC + TIMEOUT);
    expect(types(decide(tick, stateOf(runningS), T0 + SEC + TIMEOUT, policy))).toEqual(["run_stop_requested", "step_failed", "failed"]);
    const lost = failure("s", "RunnerLost");
    expect(decide(fail("s", lost), stateOf(runningS), T0 + 2 * SEC, policy)).toEqual([stopRequested("declared lost", run("s")), stepFailed("s", lost), wfFailed(lost)]);
  });
});

describe("workflow: bookkeeping", () => {
  it("command keys dedupe a result per run and a timer per workflow", () => {
    expect(commandKey(ok("a"))).toBe(`record-success:${run("a")}`);
    expect(commandKey(fail("a", failure("a"), 2))).toBe(`record-failure:${run("a", 2)}`);
    expect(commandKey(runStarted("a"))).toBe(`run-started:${run("a")}`);
    expect(commandKey(tick)).toBe("tick");
  });
});
