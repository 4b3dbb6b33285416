// The sandbox service shows a workflow as the scheduler decides it. Random runs of the
// scheduler's decider (a plan starts, runners report starts, successes and failures, timers
// fire, the workflow is cancelled or retried), each event stored as JSON and folded by the
// scheduler's projection and by the sandbox service's: after every event both agree on each
// step's status, the workflow's status and which runs are over. WORKFLOW_PROPERTY_RUNS=2000
// searches longer.
import fc from "fast-check";
import * as pb from "@ephemera/proto";
import { decode, encode, folding, runId, type DomainEvent, type StoredEvent } from "@ephemera/events";
import {
  decide, evolve, initialWorkflow, isLive, isTerminal, type WorkflowCommand, type WorkflowState,
} from "@ephemera/scheduler/decider";
import { runEnded } from "../logs/select.js";
import { stepViews } from "../sandbox/view.js";
import { evolveProgress, initialProgress, type WorkflowProgress } from "./progress.js";

const WF = "rk1.db.create";
const T0 = Date.parse("2026-01-01T00:00:00.000Z");
const RUNS = { numRuns: Number(process.env.WORKFLOW_PROPERTY_RUNS ?? 300) };
const TITLE: Record<string, string> = {
  pending: "Pending", queued: "Queued", running: "Running", retrying: "Retrying",
  succeeded: "Succeeded", failed: "Failed", cancelled: "Cancelled",
};

/** What happens next, resolved against the workflow as it is then: `pick` chooses a step, `stale` a run not its current one. */
type Act =
  | { kind: "run-started"; pick: number; stale: boolean }
  | { kind: "success"; pick: number; stale: boolean }
  | { kind: "failure"; pick: number; stale: boolean; reason: string }
  | { kind: "tick"; advanceMs: number }
  | { kind: "cancel" }
  | { kind: "retry" };

const plan = fc.array(fc.record({
  // Steps side by side as often as in a chain: two running at once is where orders matter.
  deps: fc.oneof(fc.constant<number[]>([]), fc.array(fc.nat(), { minLength: 1, maxLength: 2 })),
  retries: fc.constantFrom(0, 0, 1, 2),
  timeoutMs: fc.constantFrom(1_000, 60_000),
}), { maxLength: 5 }).map((steps) => steps.map((s, i): pb.PlannedStep => ({
  name: `s${i}`, dependsOn: i ? [...new Set(s.deps.map((d) => `s${d % i}`))] : [], timeoutMs: s.timeoutMs, retries: s.retries,
})));

// Mostly the current run of a live step (a report that moves the workflow), now and then an old or unknown one.
const run = { pick: fc.nat(), stale: fc.constantFrom(false, false, false, true) };
const act: fc.Arbitrary<Act> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant("run-started" as const), ...run }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("success" as const), ...run }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("failure" as const), ...run, reason: fc.constantFrom("Error", "OOMKilled", "RunnerLost", "Evicted", "Cancelled"),
    }),
  },
  // Past an unclaimed run's wait, a deadline and its grace, a retry's backoff, or none of them.
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant("tick" as const), advanceMs: fc.constantFrom(500, 31_000, 62_000, 125_000, 301_000) }),
  },
  { weight: 1, arbitrary: fc.constantFrom<Act>({ kind: "cancel" }, { kind: "retry" }) },
);

/** Now and then the plugin version is gone: the workflow fails as it starts. */
const missingPlugin = fc.integer({ min: 0, max: 9 }).map((n) => n === 0);

function command(a: Act, wf: WorkflowState): WorkflowCommand | undefined {
  if (a.kind === "tick" || a.kind === "retry") return { kind: a.kind };
  if (a.kind === "cancel") return { kind: "cancel", reason: "sandbox deleted" };
  if (wf.status === "none" || !wf.steps.length) return undefined;
  // A runner takes a queued run and reports on a running one (or, its start lost, on a queued one).
  const wanted = wf.steps.filter((s) => s.status === (a.kind === "run-started" ? "queued" : "running"));
  const live = wf.steps.filter(isLive);
  const pool = wanted.length ? wanted : live.length ? live : wf.steps;
  const step = pool[a.pick % pool.length]!;
  const attempt = a.stale ? (step.attempt > 1 ? step.attempt - 1 : step.attempt + 1) : Math.max(1, step.attempt);
  const id = runId(WF, step.name, attempt);
  if (a.kind === "run-started") return { kind: "run-started", step: step.name, runId: id, runner: "r1" };
  if (a.kind === "success") return { kind: "record-success", step: step.name, runId: id, outputs: [{ key: "out", size: attempt }] };
  const failure = pb.StepFailure.fromPartial({ step: step.name, runId: id, reason: a.reason, logTail: "" });
  return { kind: "record-failure", step: step.name, runId: id, failure };
}

/** The runs the scheduler may still hear from: the current run of each live step of an active workflow. */
const liveRuns = (wf: WorkflowState) =>
  new Set(wf.status === "none" || isTerminal(wf.status) ? [] : wf.steps.filter(isLive).map((s) => s.runId!));

function agree(wf: WorkflowState, view: WorkflowProgress, dispatched: Map<string, string[]>, after: string): void {
  const context = `after ${after}`;
  expect([context, view.status]).toEqual([context, wf.status]);
  const steps = wf.status === "none" ? [] : wf.steps;
  expect([context, view.steps.map((s) => [s.name, s.status, s.attempt, s.runId, s.outputs])])
    .toEqual([context, steps.map((s) => [s.name, s.status, s.attempt, s.runId, s.outputs])]);
  // What the service says of a waiting step: no runner took it (NoRunner), or when it runs again.
  const retryAt = (at: string | undefined) => (at === undefined ? undefined : Date.parse(at));
  expect([context, view.steps.map((s) => [s.status === "queued" && s.unclaimed !== undefined, retryAt(s.retryAt)])])
    .toEqual([context, steps.map((s) => [s.status === "queued" && s.unclaimed, s.retryAt])]);
  expect([context, stepViews(view, "create").map((s) => [s.name, s.status])])
    .toEqual([context, steps.map((s) => [s.name, TITLE[s.status]])]);
  // Each step lists every attempt the scheduler dispatched, in order; a run is over exactly when the scheduler is done with it.
  expect([context, view.steps.map((s) => s.attempts.map((a) => a.runId))])
    .toEqual([context, steps.map((s) => dispatched.get(s.name) ?? [])]);
  const live = liveRuns(wf);
  for (const id of [...dispatched.values()].flat()) expect([context, id, runEnded(view, id)]).toEqual([context, id, !live.has(id)]);
  expect([context, view.failure]).toEqual([context, wf.status === "none" ? undefined : wf.failure]);
}

describe("the sandbox service's view of a workflow and the scheduler's", () => {
  it("agree after every event of any run of the scheduler's decider", () => {
    const seen = new Set<string>();
    fc.assert(fc.property(plan, missingPlugin, fc.array(act, { maxLength: 40, size: "max" }), (steps, missing, acts) => {
      const started = pb.WorkflowStarted.fromPartial({
        workflowId: WF, routingKey: "rk1", resource: "db", phase: "create", cluster: "edge", steps,
        ...(missing ? { failure: { step: "", runId: "", reason: "PluginVersionMissing", message: "not published", logTail: "" } } : {}),
      });
      let now = T0;
      let wf = initialWorkflow();
      let view = initialProgress();
      const fold = folding(evolveProgress);
      const dispatched = new Map<string, string[]>();
      const apply = (given: WorkflowCommand) => {
        for (const e of decide(given, wf, now)) {
          // Both read what the store holds: the event as JSON, at its envelope time.
          const stored = JSON.parse(JSON.stringify({ ...encode(e), time: new Date(now).toISOString() })) as StoredEvent;
          wf = evolve(wf, decode(stored) as DomainEvent, Date.parse(stored.time));
          view = fold(view, stored);
          if (e.type === "ephemera.workflow.step_dispatched.v1") {
            dispatched.set(e.data.step, [...dispatched.get(e.data.step) ?? [], e.data.runId]);
          }
          agree(wf, view, dispatched, `${given.kind} → ${e.type}`);
          seen.add(wf.status);
          if (wf.status !== "none") for (const s of wf.steps) seen.add(`step ${s.status}`);
        }
      };
      apply({ kind: "start", started });
      for (const a of acts) {
        now += a.kind === "tick" ? a.advanceMs : 100;
        const next = command(a, wf);
        if (next) apply(next);
      }
    }), RUNS);
    // The runs reached every status a workflow and a step can take: ones that never retried,
    // failed or were cancelled would prove little.
    expect([...seen].sort()).toEqual([
      "cancelled", "cancelling", "failed", "running",
      "step cancelled", "step failed", "step pending", "step queued", "step retrying", "step running", "step succeeded",
      "succeeded",
    ]);
  });
});
