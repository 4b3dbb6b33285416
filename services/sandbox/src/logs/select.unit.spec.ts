// Which runs a log request reads and whether a follow waits for more: given the sandbox's
// and its workflows' events, then the selection.
import { ev, type DomainEvent } from "@ephemera/events";
import { NotFoundError } from "@ephemera/kit";
import { evolveProgress, initialProgress, type WorkflowProgress } from "../workflow/progress.js";
import { evolveSandbox, initialSandbox, type SandboxState } from "../sandbox/state.js";
import { runEnded, selectRuns, type LogFilter, type Phase } from "./select.js";

const T = "2026-01-01T00:00:00.000Z";
const WF = "rk1.db.create";
const run = (step: string, attempt = 1) => `${WF}.${step}.${attempt}`;
const created = ev("ephemera.sandbox.created.v1", { name: "sb", routingKey: "rk1", resources: [{ name: "db", plugin: "p", version: "1.0.0", params: {} }] });
const started = ev("ephemera.workflow.started.v1", { workflowId: WF, steps: [{ name: "a" }, { name: "b", dependsOn: ["a"] }] });
const dispatched = (step: string, attempt = 1) => ev("ephemera.workflow.step_dispatched.v1", { step, runId: run(step, attempt), attempt });
const succeeded = (step: string, attempt = 1) => ev("ephemera.workflow.step_succeeded.v1", { step, runId: run(step, attempt) });
const failure = (step: string, attempt = 1) => ({ step, runId: run(step, attempt), reason: "Error" });

function given(sandbox: DomainEvent[], create: DomainEvent[], plugin: Record<Phase, string[]> | null = { create: ["a", "b"], delete: ["clean"] }) {
  const sb: SandboxState = sandbox.reduce((s, e) => evolveSandbox(s, e, T), initialSandbox());
  const wf: WorkflowProgress | undefined = create.length ? create.reduce((s, e) => evolveProgress(s, e, T), initialProgress()) : undefined;
  const select = (filter: LogFilter = {}) => selectRuns("sb", "db", filter, {
    sandbox: sb, workflow: (phase) => (phase === "create" ? wf : undefined), pluginSteps: (phase) => plugin?.[phase], // null: the version is gone
  });
  return { select, wf };
}

describe("log selection", () => {
  it("waits for a create workflow not started yet, of an active sandbox", () => {
    expect(given([created], []).select()).toEqual({ runs: [], more: true });
    expect(given([created], []).select({ phase: "delete" })).toEqual({ runs: [], more: false });
  });

  it("lists each step's latest attempt in plan order, ended or not, and waits while the workflow runs", () => {
    const { select } = given([created], [started, dispatched("a"), ev("ephemera.workflow.step_failed.v1", { step: "a", runId: run("a"), failure: failure("a") }),
      ev("ephemera.workflow.retried.v1", { steps: ["a"] }), dispatched("a", 2)]);
    expect(select()).toEqual({ runs: [{ step: "a", phase: "create", attempt: 2, runId: run("a", 2), ended: false }], more: true });
    expect(select({ attempt: 1 })).toEqual({ runs: [{ step: "a", phase: "create", attempt: 1, runId: run("a"), ended: true }], more: false });
  });

  it("with a step named, waits only while that step may still run", () => {
    const running = given([created], [started, dispatched("a")]);
    expect(running.select({ step: "b" })).toEqual({ runs: [], more: true });
    const aDone = given([created], [started, dispatched("a"), succeeded("a")]);
    expect(aDone.select({ step: "a" })).toEqual({ runs: [{ step: "a", phase: "create", attempt: 1, runId: run("a"), ended: true }], more: false });
    const bRetrying = given([created], [started, dispatched("a"), succeeded("a"), dispatched("b"), ev("ephemera.workflow.step_retry_scheduled.v1", {
      step: "b", runId: run("b"), failure: failure("b"), nextAttempt: 2, retryAt: T,
    })]);
    expect(bRetrying.select({ step: "b" }).more).toBe(true);
  });

  it("counts every run of an ended workflow as ended, and waits for nothing", () => {
    const { select, wf } = given([created], [started, dispatched("a"), ev("ephemera.workflow.failed.v1", { failure: failure("a") })]);
    expect(select()).toEqual({ runs: [{ step: "a", phase: "create", attempt: 1, runId: run("a"), ended: true }], more: false });
    expect(runEnded(wf, run("a"))).toBe(true);
    expect(runEnded(wf, run("zz"))).toBe(false);
  });

  it("refuses an unknown sandbox, resource or step, and cannot tell a step once the plugin and workflows are gone", () => {
    expect(() => given([], []).select()).toThrow(new NotFoundError("sandbox sb not found"));
    const sandbox = evolveSandbox(initialSandbox(), created, T);
    expect(() => selectRuns("sb", "cache", {}, { sandbox, workflow: () => undefined, pluginSteps: () => undefined })).toThrow("sandbox sb has no resource cache");
    expect(() => given([created], []).select({ step: "c" })).toThrow("resource db of sandbox sb has no step c (its steps: a, b, clean)");
    expect(() => given([created], []).select({ step: "a", phase: "delete" })).toThrow("has no step a in its delete workflow (its steps: clean)");
    expect(given([created], [], null).select({ step: "c" })).toEqual({ runs: [], more: true });
  });
});
