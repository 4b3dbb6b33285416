// The sandbox service's view of a workflow (the scheduler's fold and the attempts around it): given events, then what it shows.
import { encode, ev, folding, type DomainEvent, type StoredEvent } from "@ephemera/events";
import { evolveProgress, initialProgress, type WorkflowProgress } from "./progress.js";

const recorded = (e: DomainEvent, time = "2026-01-01T00:00:00.000Z"): StoredEvent => ({ ...encode(e), time });

describe("workflow fold", () => {
  const T = "2026-01-01T00:00:00.000Z";
  const given = (...events: DomainEvent[]): WorkflowProgress => events.reduce((st, e) => evolveProgress(st, e, T), initialProgress());
  const WF = "rk1.db.create";
  const run = (step: string, attempt = 1) => `${WF}.${step}.${attempt}`;
  const started = ev("ephemera.workflow.started.v1", { workflowId: WF, steps: [{ name: "a" }, { name: "b", dependsOn: ["a"] }] });
  const dispatched = (step: string, attempt = 1) => ev("ephemera.workflow.step_dispatched.v1", { step, runId: run(step, attempt), attempt });
  const running = (step: string, attempt = 1) => ev("ephemera.workflow.step_started.v1", { step, runId: run(step, attempt), runner: "r1" });
  const failure = (step: string, attempt = 1, reason = "Error") => ({ step, runId: run(step, attempt), reason, message: "", logTail: "boom" });
  const retryScheduled = (step: string, attempt: number, retryAt: string) => ev("ephemera.workflow.step_retry_scheduled.v1", {
    step, runId: run(step, attempt), failure: failure(step, attempt), nextAttempt: attempt + 1, retryAt,
  });
  const stepOf = (s: WorkflowProgress, name: string) => s.steps.find((x) => x.name === name)!;
  const attempts = (s: WorkflowProgress, name: string) => stepOf(s, name).attempts.map((a) => [a.attempt, a.runId, a.status, a.failure?.reason]);

  it("starts with every planned step pending", () => {
    const s = given(started);
    expect(s.status).toBe("running");
    expect(s.steps.map((x) => [x.name, x.status, x.dependsOn, x.attempts])).toEqual([["a", "pending", [], []], ["b", "pending", ["a"], []]]);
  });

  it("moves a step queued → running → succeeded, one attempt", () => {
    expect(stepOf(given(started, dispatched("a")), "a")).toMatchObject({ status: "queued", attempt: 1, runId: run("a") });
    expect(stepOf(given(started, dispatched("a"), running("a")), "a").status).toBe("running");
    const done = given(started, dispatched("a"), running("a"), ev("ephemera.workflow.step_succeeded.v1", { step: "a", runId: run("a"), outputs: [{ key: "x", size: 1 }] }));
    expect(stepOf(done, "a")).toMatchObject({ status: "succeeded", outputs: [{ key: "x", size: 1 }] });
    expect(attempts(done, "a")).toEqual([[1, run("a"), "succeeded", undefined]]);
  });

  it("records every attempt of a step across a retry, each with its own outcome", () => {
    const retrying = given(started, dispatched("a"), running("a"), retryScheduled("a", 1, "2026-01-01T00:00:01.000Z"));
    expect(stepOf(retrying, "a")).toMatchObject({ status: "retrying", retryAt: "2026-01-01T00:00:01.000Z", attempt: 1 });
    expect(attempts(retrying, "a")).toEqual([[1, run("a"), "failed", "Error"]]);

    const again = given(started, dispatched("a"), running("a"), retryScheduled("a", 1, "2026-01-01T00:00:01.000Z"), dispatched("a", 2), running("a", 2));
    expect(stepOf(again, "a")).toMatchObject({ status: "running", attempt: 2, runId: run("a", 2), retryAt: undefined });
    expect(attempts(again, "a")).toEqual([[1, run("a"), "failed", "Error"], [2, run("a", 2), "running", undefined]]);
    expect(attempts(again, "b")).toEqual([]);

    const failed = evolveProgress(again, ev("ephemera.workflow.step_failed.v1", { step: "a", runId: run("a", 2), failure: failure("a", 2, "RunnerLost") }), T);
    expect(attempts(failed, "a")).toEqual([[1, run("a"), "failed", "Error"], [2, run("a", 2), "failed", "RunnerLost"]]);
    expect(failed.failure).toMatchObject({ runId: run("a", 2), reason: "RunnerLost" });
  });

  it("times each attempt by its events: dispatched, started, ended", () => {
    const at = (n: number) => `2026-01-01T00:00:0${n}.000Z`;
    const s = [started, dispatched("a"), running("a"), retryScheduled("a", 1, at(5)), dispatched("a", 2), running("a", 2),
      ev("ephemera.workflow.step_succeeded.v1", { step: "a", runId: run("a", 2), outputs: [] })]
      .reduce((st, e, i) => evolveProgress(st, e, at(i)), initialProgress());
    expect(stepOf(s, "a").attempts.map((a) => [a.attempt, a.queuedAt, a.startedAt, a.endedAt]))
      .toEqual([[1, at(1), at(2), at(3)], [2, at(4), at(5), at(6)]]);
  });

  it("times an attempt whose start was recorded with its result from when it began (started_at), not from that commit", () => {
    const at = (n: number) => `2026-01-01T00:00:0${n}.000Z`;
    const late = ev("ephemera.workflow.step_started.v1", { step: "a", runId: run("a"), runner: "r1", startedAt: at(2) });
    const s = [started, dispatched("a"), late, ev("ephemera.workflow.step_succeeded.v1", { step: "a", runId: run("a"), outputs: [] })]
      .reduce((st, e, i) => evolveProgress(st, e, i < 2 ? at(i) : at(7)), initialProgress());
    expect(stepOf(s, "a").attempts.map((a) => [a.attempt, a.status, a.queuedAt, a.startedAt, a.endedAt])).toEqual([[1, "succeeded", at(1), at(2), at(7)]]);
  });

  it("a stale run's start does not move the step", () => {
    const s = given(started, dispatched("a"), retryScheduled("a", 1, T), dispatched("a", 2), running("a", 1));
    expect(stepOf(s, "a")).toMatchObject({ status: "queued", attempt: 2, runId: run("a", 2) });
  });

  it("keeps the attempts of a retried workflow and adds the new ones", () => {
    const failedWf = given(started, dispatched("a"), ev("ephemera.workflow.step_failed.v1", { step: "a", runId: run("a"), failure: failure("a") }),
      ev("ephemera.workflow.failed.v1", { failure: failure("a") }));
    expect(failedWf.status).toBe("failed");
    const s = [ev("ephemera.workflow.retried.v1", { steps: ["a", "b"] }), dispatched("a", 2)].reduce((st, e) => evolveProgress(st, e, T), failedWf);
    expect(s).toMatchObject({ status: "running", retried: 1 });
    expect(s.failure).toBeUndefined();
    expect(attempts(s, "a")).toEqual([[1, run("a"), "failed", "Error"], [2, run("a", 2), "queued", undefined]]);
    expect(stepOf(s, "b").status).toBe("pending");
  });

  it("marks a run nobody took as unclaimed, until a runner takes it", () => {
    const unclaimed = ev("ephemera.workflow.step_unclaimed.v1", { step: "a", runId: run("a"), cluster: "edge", waitedMs: 30_000 });
    const s = evolveProgress(given(started, dispatched("a")), unclaimed, "2026-01-01T00:00:30.000Z");
    expect(stepOf(s, "a").unclaimed).toEqual({ cluster: "edge", since: "2026-01-01T00:00:30.000Z" });
    expect(stepOf(evolveProgress(s, running("a"), T), "a").unclaimed).toBeUndefined();
  });

  it("a cancel cancels queued attempts at once and leaves running ones to end", () => {
    const s = given(started, dispatched("a"), running("a"), dispatched("b"), ev("ephemera.workflow.cancel_requested.v1", { reason: "x", runIds: [run("a"), run("b")] }));
    expect(s.status).toBe("cancelling");
    expect(s.steps.map((x) => [x.name, x.status, x.attempts.map((a) => a.status)])).toEqual([["a", "running", ["running"]], ["b", "cancelled", ["cancelled"]]]);
  });

  it("a failed workflow cancels what never got to run", () => {
    const s = given(started, dispatched("a"), running("a"), dispatched("b"), ev("ephemera.workflow.failed.v1", { failure: failure("a") }));
    expect(s.status).toBe("failed");
    expect(s.steps.map((x) => [x.name, x.status, x.attempts.map((a) => a.status)])).toEqual([["a", "cancelled", ["cancelled"]], ["b", "cancelled", ["cancelled"]]]);
  });

  it("folds stored events through their codec and time, skipping types it does not know", () => {
    const fold = folding(evolveProgress);
    const stored = [
      recorded(ev("ephemera.workflow.started.v1", { workflowId: WF, steps: [{ name: "a" }] })),
      { ...recorded(ev("ephemera.sandbox.ready.v1", {})), type: "ephemera.workflow.renamed.v9" },
      recorded(dispatched("a")),
      recorded(ev("ephemera.workflow.step_unclaimed.v1", { step: "a", runId: run("a"), cluster: "edge", waitedMs: 30_000 }), "2026-01-01T00:00:30.000Z"),
    ];
    const s = JSON.parse(JSON.stringify(stored)) as StoredEvent[];
    expect(stepOf(s.reduce(fold, initialProgress()), "a")).toMatchObject({ status: "queued", unclaimed: { cluster: "edge", since: "2026-01-01T00:00:30.000Z" } });
  });

  it("shows no step its plan did not list, as the scheduler has none", () => {
    const s = given(ev("ephemera.workflow.started.v1", { steps: [{ name: "a" }] }), ev("ephemera.workflow.step_dispatched.v1", { step: "b", runId: "r.b.1", attempt: 1 }));
    expect(s.steps.map((x) => [x.name, x.status, x.runId, x.attempts.length])).toEqual([["a", "pending", undefined, 0]]);
  });
});
