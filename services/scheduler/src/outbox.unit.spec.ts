import * as pb from "@ephemera/proto";
import { ev, type DomainEvent } from "@ephemera/events";
import { DirectDispatches, MAX_PLAN_BYTES, planOf } from "./outbox.js";
import { evolve, initialWorkflow, type WorkflowState } from "./workflow/state.js";

describe("DirectDispatches", () => {
  it("answers once for a run published here, and never for one that was not", async () => {
    const direct = new DirectDispatches();
    direct.begin("rk1.db.create.a.1")(true);
    expect(await direct.take("rk1.db.create.b.1")).toBe(false);
    expect(await direct.take("rk1.db.create.a.1")).toBe(true);
    expect(await direct.take("rk1.db.create.a.1")).toBe(false);
  });

  it("makes the outbox wait for a publish under way: published, nothing to do; failed, the outbox publishes", async () => {
    const direct = new DirectDispatches();
    const a = direct.begin("a");
    const b = direct.begin("b");
    const answers: Array<[string, boolean]> = [];
    const asked = [direct.take("a").then((x) => answers.push(["a", x])), direct.take("b").then((x) => answers.push(["b", x]))];
    await Promise.resolve();
    expect(answers).toEqual([]); // neither publish has settled
    b(false);
    a(true);
    await Promise.all(asked);
    expect(answers.sort()).toEqual([["a", true], ["b", false]]);
  });

  it("holds at most its limit, forgetting the oldest (the outbox then publishes it again, a duplicate the queue drops)", async () => {
    const direct = new DirectDispatches(2);
    for (const id of ["a", "b", "c"]) direct.begin(id)(true);
    expect(direct.size).toBe(2);
    expect(await direct.take("a")).toBe(false);
    expect([await direct.take("b"), await direct.take("c")]).toEqual([true, true]);
  });
});

describe("DirectDispatches: appends under way", () => {
  it("makes the outbox wait for this process's appends of a workflow, not another's, and a second done does nothing", async () => {
    const direct = new DirectDispatches();
    const first = direct.appending("wf1");
    const second = direct.appending("wf1");
    let waited = false;
    const waiting = direct.appended("wf1").then(() => { waited = true; });
    await direct.appended("wf2"); // nothing under way for wf2: no wait
    first();
    first();
    await Promise.resolve();
    expect(waited).toBe(false); // the second append is still under way
    second();
    await waiting;
    expect(waited).toBe(true);
    await direct.appended("wf1"); // none left
  });
});

describe("planOf: a dispatch's plan, only where every input is known for good", () => {
  const spec = pb.ResourcePluginSpec.fromPartial({
    create: [
      { name: "make", script: "#!/bin/sh\nmake", outputs: [{ name: "host", valueFromPath: "/tmp/host" }] },
      {
        name: "use", script: "#!/bin/sh\nuse", outputs: [{ name: "seen", valueFromPath: "/tmp/seen" }],
        inputs: [
          { name: "host", valueFromStep: { name: "make", output: "host" }, as: { env: "", path: "/tmp/in/host" } },
          { name: "region", valueFromSandbox: true },
          { name: "zone-id", valueFromSandbox: true },
          { name: "constructor", valueFromSandbox: true },
        ],
      },
    ],
    delete: [{ name: "drop", script: "#!/bin/sh\ndrop", inputs: [{ name: "host", valueFromStep: { name: "make", output: "host" } }] }],
  });
  const workflow = (phase: "create" | "delete", ...events: DomainEvent[]): WorkflowState => {
    const id = `rk.db.${phase}`;
    const started = ev("ephemera.workflow.started.v1", {
      workflowId: id, routingKey: "rk", resource: "db", phase, plugin: "p", version: "1", cluster: "local", params: { region: "eu-1" },
      steps: spec[phase].map((s) => ({ name: s.name, dependsOn: s.name === "use" ? ["make"] : [] })),
      ...(phase === "delete" ? { createWorkflowId: "rk.db.create" } : {}),
    });
    return [started, ...events].reduce((state, e) => evolve(state, e, 0), initialWorkflow());
  };
  const made = (sha256?: string) => [
    ev("ephemera.workflow.step_dispatched.v1", { step: "make", runId: "rk.db.create.make.1", attempt: 1 }),
    ev("ephemera.workflow.step_succeeded.v1", { step: "make", runId: "rk.db.create.make.1", outputs: [{ key: "host", size: 4, ...(sha256 ? { sha256 } : {}) }] }),
  ];
  const started = (w: WorkflowState) => (w.status === "none" ? fail("not started") : w);
  const step = (phase: "create" | "delete", name: string) => spec[phase].find((s) => s.name === name)!;

  it("plans params (one unset) and a succeeded producer's output with its digest, env names as the IO context gives them", () => {
    const plan = planOf(step("create", "use"), spec.create, started(workflow("create", ...made("ab12"))), undefined);
    expect(plan).toEqual({
      script: "#!/bin/sh\nuse",
      inputs: [
        { name: "host", env: "", path: "/tmp/in/host", step: "make", output: "host", runId: "rk.db.create.make.1", sha256: "ab12" },
        { name: "region", env: "REGION", path: "", step: "", output: "", runId: "", sha256: "", param: "eu-1" },
        { name: "zone-id", env: "ZONE_ID", path: "", step: "", output: "", runId: "", sha256: "" },
        // Named like an Object method and not set: no value, not the method.
        { name: "constructor", env: "CONSTRUCTOR", path: "", step: "", output: "", runId: "", sha256: "" },
      ],
      outputs: step("create", "use").outputs,
    });
  });

  it("plans nothing when a producer has not succeeded or journaled no digest, or the plan is too large", () => {
    expect(planOf(step("create", "use"), spec.create, started(workflow("create")), undefined)).toBeUndefined();
    expect(planOf(step("create", "use"), spec.create, started(workflow("create", ...made())), undefined)).toBeUndefined();
    // Retried: the producer runs again, its earlier run and outputs no longer count.
    const retried = workflow("create", ...made("ab12"), ev("ephemera.workflow.retried.v1", { steps: ["make"] }));
    expect(planOf(step("create", "use"), spec.create, started(retried), undefined)).toBeUndefined();
    const big = { ...step("create", "use"), script: "x".repeat(MAX_PLAN_BYTES + 1) };
    expect(planOf(big, spec.create, started(workflow("create", ...made("ab12"))), undefined)).toBeUndefined();
  });

  it("plans a delete step's read of a create step only once the create workflow has ended; a producer that never ran has no value", () => {
    const drop = step("delete", "drop");
    const deleting = started(workflow("delete"));
    expect(planOf(drop, spec.delete, deleting, undefined)).toBeUndefined();
    const creating = workflow("create", ...made("ab12"));
    expect(planOf(drop, spec.delete, deleting, creating)).toBeUndefined();
    const created = evolve(creating, ev("ephemera.workflow.succeeded.v1", {}), 0);
    expect(planOf(drop, spec.delete, deleting, created)?.inputs).toEqual([
      { name: "host", env: "HOST", path: "", step: "make", output: "host", runId: "rk.db.create.make.1", sha256: "ab12" },
    ]);
    const failedEarly = evolve(workflow("create"), ev("ephemera.workflow.failed.v1", {}), 0);
    expect(planOf(drop, spec.delete, deleting, failedEarly)?.inputs).toEqual([
      { name: "host", env: "HOST", path: "", step: "make", output: "host", runId: "", sha256: "" },
    ]);
  });
});
