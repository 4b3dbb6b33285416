import { ev, type DomainEvent } from "@ephemera/events";
import { decideWorkflow, type WorkflowCommand } from "./decide.js";
import { evolveWorkflow, initialWorkflow } from "@ephemera/events";
import { planSteps } from "./plan.js";
import * as pb from "@ephemera/proto";

const given = (events: DomainEvent[]) => events.reduce((s, e) => evolveWorkflow(s, e), initialWorkflow());
const when = (events: DomainEvent[], command: WorkflowCommand) => decideWorkflow(command, given(events));
const types = (events: DomainEvent[]) => events.map((e) => `${e.type.split(".")[2]}${"step" in e.data ? `:${e.data.step}` : ""}`);

const diamond = pb.ResourcePluginSpec.fromPartial({
  create: [
    { name: "a", outputs: [{ name: "x", valueFromPath: "/tmp/x" }] },
    { name: "b", inputs: [{ name: "x", valueFromStep: { name: "a", output: "x" } }] },
    { name: "c", inputs: [{ name: "x", valueFromStep: { name: "a", output: "x" } }] },
    { name: "d", inputs: [{ name: "p", valueFromStep: { name: "b", output: "y" } }, { name: "q", valueFromStep: { name: "c", output: "z" } }] },
  ],
  delete: [{ name: "z", inputs: [{ name: "x", valueFromStep: { name: "a", output: "x" } }] }],
});
const WF = "rk1.db.create";
const started = ev("ephemera.workflow.started.v1", { workflowId: WF, phase: "create", steps: planSteps(diamond, "create") });
const dispatched = (step: string) => ev("ephemera.workflow.step_dispatched.v1", { step, runId: `${WF}.${step}.1`, attempt: 1 });
const succeeded = (step: string, outputs: pb.OutputRef[] = []) => ev("ephemera.workflow.step_succeeded.v1", { step, runId: `${WF}.${step}.1`, outputs });
const ok = (step: string, outputs: pb.OutputRef[] = []): WorkflowCommand => ({ kind: "record-success", step, runId: `${WF}.${step}.1`, outputs });
const failure = pb.StepFailure.fromPartial({ step: "b", exitCode: 3, reason: "Error", logTail: "boom" });

describe("planning", () => {
  it("turns same-phase valueFromStep references into edges and ignores delete→create references", () => {
    expect(planSteps(diamond, "create")).toEqual([
      { name: "a", dependsOn: [] }, { name: "b", dependsOn: ["a"] }, { name: "c", dependsOn: ["a"] }, { name: "d", dependsOn: ["b", "c"] },
    ]);
    expect(planSteps(diamond, "delete")).toEqual([{ name: "z", dependsOn: [] }]);
  });
});

describe("workflow decider", () => {
  it("starts by dispatching only the roots", () => {
    expect(types(when([], { kind: "start", started: started.data }))).toEqual(["started", "step_dispatched:a"]);
  });

  it("starting twice changes nothing", () => {
    expect(when([started, dispatched("a")], { kind: "start", started: started.data })).toEqual([]);
  });

  it("fans out: both b and c are dispatched together when a succeeds", () => {
    const out = when([started, dispatched("a")], ok("a", [{ key: "x", size: 3 }]));
    expect(types(out)).toEqual(["step_succeeded:a", "step_dispatched:b", "step_dispatched:c"]);
    expect(out[1]!.data).toEqual({ step: "b", runId: `${WF}.b.1`, attempt: 1 });
  });

  it("joins: d waits for both b and c", () => {
    const history = [started, dispatched("a"), succeeded("a"), dispatched("b"), dispatched("c")];
    expect(types(when(history, ok("b")))).toEqual(["step_succeeded:b"]);
    expect(types(when([...history, succeeded("b")], ok("c")))).toEqual(["step_succeeded:c", "step_dispatched:d"]);
  });

  it("succeeds with every output keyed <step>.<output> when the last step succeeds", () => {
    const history = [started, dispatched("a"), succeeded("a", [{ key: "x", size: 3 }]), dispatched("b"), dispatched("c"),
      succeeded("b"), succeeded("c", [{ key: "z", size: 1 }]), dispatched("d")];
    const out = when(history, ok("d"));
    expect(types(out)).toEqual(["step_succeeded:d", "succeeded"]);
    expect(out[1]!.data).toEqual({ outputs: [{ key: "a.x", size: 3 }, { key: "c.z", size: 1 }] });
  });

  it("a failed step stops new dispatches and fails the workflow once running steps end", () => {
    const history = [started, dispatched("a"), succeeded("a"), dispatched("b"), dispatched("c")];
    const out = when(history, { kind: "record-failure", step: "b", runId: `${WF}.b.1`, failure });
    expect(types(out)).toEqual(["step_failed:b"]);
    const after = [...history, ...out];
    const end = when(after, ok("c"));
    expect(types(end)).toEqual(["step_succeeded:c", "failed"]);
    expect(end[1]!.data).toEqual({ failure });
  });

  it("ignores a result for a run that is not the step's current run", () => {
    expect(when([started, dispatched("a")], { kind: "record-success", step: "a", runId: "other", outputs: [] })).toEqual([]);
    expect(when([started, dispatched("a"), succeeded("a")], ok("a"))).toEqual([]);
  });

  it("cancelling waits for running steps, then ends cancelled", () => {
    const history = [started, dispatched("a")];
    const out = when(history, { kind: "cancel", reason: "sandbox deleted" });
    expect(types(out)).toEqual(["cancel_requested"]);
    expect(types(when([...history, ...out], ok("a")))).toEqual(["step_succeeded:a", "cancelled"]);
  });

  it("cancelling a workflow with nothing running ends it at once; a finished one is left alone", () => {
    const noSteps = ev("ephemera.workflow.started.v1", { workflowId: WF, steps: [] });
    expect(types(when([started, dispatched("a"), succeeded("a"), ev("ephemera.workflow.failed.v1", {})], { kind: "cancel", reason: "x" }))).toEqual([]);
    expect(types(when([], { kind: "start", started: noSteps.data }))).toEqual(["started", "succeeded"]);
  });
});
