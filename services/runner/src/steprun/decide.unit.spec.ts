import * as pb from "@ephemera/proto";
import { ev, type DomainEvent } from "@ephemera/events";
import { StepRunNotStartedError, stepRunDecider, type StepRunCommand } from "./decide.js";
import { deciderSpec } from "../../../../test/support/decider.js";

const RUN = "rk1.db.create.provision.1";
const dispatch = pb.StepDispatch.fromPartial({ runId: RUN, workflowId: "rk1.db.create", step: "provision", attempt: 1, cluster: "local" });
const run = { runId: RUN, workflowId: "rk1.db.create", step: "provision" };

const started = ev("ephemera.steprun.started.v1", { ...run, attempt: 1, driver: "process", runner: "host-1" });
const succeeded = ev("ephemera.steprun.succeeded.v1", { ...run, outputs: [{ name: "host", value: Buffer.from("db") }], durationMs: 5 });
const failedLost = ev("ephemera.steprun.failed.v1", { ...run, failure: { ...run, reason: "RunnerLost", message: "", logTail: "" } });

const spec = deciderSpec(stepRunDecider, 0);
/** A step run never looks at time. */
const given = (...events: DomainEvent[]) => ({
  when: (command: StepRunCommand) => {
    const w = spec.given(spec.at(0, ...events)).when(command);
    return w.events;
  },
});

const start: StepRunCommand = { type: "start", dispatch, driver: "process", runner: "host-2" };

describe("StepRun decider", () => {
  it("starts a new run, naming the driver and the runner", () => {
    expect(given().when(start)).toEqual([
      ev("ephemera.steprun.started.v1", { ...run, attempt: 1, driver: "process", runner: "host-2" }),
    ]);
  });

  it("records a run started but never finished as lost instead of starting it again", () => {
    const [e, ...rest] = given(started).when(start);
    expect(rest).toEqual([]);
    expect(e?.type).toBe("ephemera.steprun.failed.v1");
    expect(e?.data).toMatchObject({ ...run, failure: { step: "provision", runId: RUN, reason: "RunnerLost", message: expect.stringContaining("host-1") } });
  });

  it("does nothing when a finished run is delivered again", () => {
    expect(given(started, succeeded).when(start)).toEqual([]);
    expect(given(started, failedLost).when(start)).toEqual([]);
  });

  it("records success with the outputs", () => {
    const outputs = [{ name: "host", value: Buffer.alloc(0), size: 4, sha256: "a".repeat(64) }];
    expect(given(started).when({ type: "succeed", outputs, durationMs: 1200 })).toEqual([
      ev("ephemera.steprun.succeeded.v1", { ...run, outputs, durationMs: 1200 }),
    ]);
  });

  it("records failure with exit code, reason and log tail, filling in the step and run", () => {
    const events = given(started).when({
      type: "fail", failure: { exitCode: 3, reason: "Error", message: "script exited with code 3", logTail: "boom\n" }, durationMs: 40,
    });
    expect(events).toEqual([ev("ephemera.steprun.failed.v1", {
      ...run, durationMs: 40,
      failure: { step: "provision", runId: RUN, exitCode: 3, reason: "Error", message: "script exited with code 3", logTail: "boom\n" },
    })]);
  });

  it("keeps the first recorded result", () => {
    expect(given(started, failedLost).when({ type: "succeed", outputs: [], durationMs: 1 })).toEqual([]);
  });

  it("lets the runner incarnation that started a run resume it without a second start", () => {
    const mine: StepRunCommand = { type: "start", dispatch, driver: "process", runner: "host-1" };
    expect(given(started).when(mine)).toEqual([]);
  });

  it("lets a runner follow the live pod of a run a lost runner started, recording nothing, and never adopts a finished run", () => {
    const adopt: StepRunCommand = { type: "start", dispatch, driver: "kubernetes", runner: "host-2", adopt: true };
    expect(given(started).when(adopt)).toEqual([]);
    expect(given(started, succeeded).when(adopt)).toEqual([]);
    expect(given().when(adopt)).toEqual([ev("ephemera.steprun.started.v1", { ...run, attempt: 1, driver: "kubernetes", runner: "host-2" })]);
  });

  it("drops a dispatch no longer wanted, recording why, without a start", () => {
    expect(given().when({ type: "drop", dispatch, message: "dropped: the workflow was cancelled" })).toEqual([
      ev("ephemera.steprun.failed.v1", { ...run, failure: { ...run, reason: "Cancelled", message: "dropped: the workflow was cancelled", logTail: "" } }),
    ]);
    // A run that started is not dropped: it ends with its result.
    expect(given(started).when({ type: "drop", dispatch, message: "x" })).toEqual([]);
  });

  it("refuses a result for a run that never started", () => {
    expect(() => given().when({ type: "succeed", outputs: [], durationMs: 1 })).toThrow(StepRunNotStartedError);
    expect(() => given().when({ type: "fail", failure: { reason: "Error", message: "", logTail: "" }, durationMs: 1 })).toThrow(StepRunNotStartedError);
  });
});
