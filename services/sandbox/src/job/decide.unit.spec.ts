// The job decider, given events, when a command, then events or an error.
import * as pb from "@ephemera/proto";
import { ev, type DomainEvent } from "@ephemera/events";
import { ConflictError, NotFoundError } from "@ephemera/kit";
import { decideJob, type JobCommand } from "./decide.js";
import { evolveJob, initialJob, type JobState } from "./state.js";

const spec = pb.JobSpec.fromPartial({ runnerGroup: "g", command: ["make", "e2e"] });
const given = (...events: DomainEvent[]): JobState => events.reduce((s, e, i) => evolveJob(s, e, `t${i}`, i + 1), initialJob());
const submitted = ev("ephemera.job.submitted.v1", { name: "j", spec, submitter: "ann", routingKey: "rk1" });
const assigned = ev("ephemera.job.assigned.v1", { pod: "g-1" });
const finish = (outcome: "succeeded" | "failed" | "cancelled", exitCode: number, reason: string, pod = "g-1"): JobCommand =>
  ({ kind: "finish", name: "j", pod, outcome, exitCode, reason, message: "" });

describe("a job", () => {
  it("is submitted once, with its submitter and routing key", () => {
    const submit: JobCommand = { kind: "submit", name: "j", spec, submitter: "ann", routingKey: "rk1" };
    expect(decideJob(submit, given())).toEqual([submitted]);
    expect(() => decideJob(submit, given(submitted))).toThrow(ConflictError);
  });

  it("is assigned to one pod, once", () => {
    expect(decideJob({ kind: "assign", name: "j", pod: "g-1" }, given(submitted))).toEqual([assigned]);
    expect(() => decideJob({ kind: "assign", name: "j", pod: "g-2" }, given(submitted, assigned))).toThrow(ConflictError);
    expect(() => decideJob({ kind: "assign", name: "x", pod: "g-1" }, given())).toThrow(NotFoundError);
  });

  it("ends as its pod reports, only from that pod; a repeated report changes nothing", () => {
    expect(decideJob(finish("succeeded", 0, "exited"), given(submitted, assigned))).toEqual([ev("ephemera.job.succeeded.v1", { exitCode: 0, reason: "exited" })]);
    expect(decideJob(finish("failed", 124, "timeout"), given(submitted, assigned))).toEqual([ev("ephemera.job.failed.v1", { exitCode: 124, reason: "timeout" })]);
    expect(() => decideJob(finish("succeeded", 0, "exited", "g-2"), given(submitted, assigned))).toThrow(ConflictError);
    expect(() => decideJob(finish("succeeded", 0, "exited"), given(submitted))).toThrow(ConflictError);
    const ended = ev("ephemera.job.failed.v1", { exitCode: 1, reason: "exited" });
    expect(decideJob(finish("failed", 1, "exited"), given(submitted, assigned, ended))).toEqual([]);
  });

  it("deleted while queued is cancelled at once", () => {
    expect(decideJob({ kind: "delete", name: "j", by: "bob" }, given(submitted))).toEqual([ev("ephemera.job.cancelled.v1", { reason: "deleted by bob while queued" })]);
  });

  it("deleted while running asks its pod to stop once; the pod's report or the server's grace ends it", () => {
    const requested = ev("ephemera.job.cancel_requested.v1", { by: "bob" });
    expect(decideJob({ kind: "delete", name: "j", by: "bob" }, given(submitted, assigned))).toEqual([requested]);
    expect(decideJob({ kind: "delete", name: "j", by: "bob" }, given(submitted, assigned, requested))).toEqual([]);
    expect(decideJob(finish("cancelled", 143, "cancelled"), given(submitted, assigned, requested)))
      .toEqual([ev("ephemera.job.cancelled.v1", { reason: "stopped by its pod after a cancel" })]);
    const expire: JobCommand = { kind: "expire", name: "j", outcome: "cancelled", reason: "cancelled", message: "pod g-1 did not stop it within 10s" };
    expect(decideJob(expire, given(submitted, assigned, requested))).toEqual([ev("ephemera.job.cancelled.v1", { reason: "pod g-1 did not stop it within 10s" })]);
    const cancelled = ev("ephemera.job.cancelled.v1", { reason: "x" });
    expect(decideJob(expire, given(submitted, assigned, requested, cancelled))).toEqual([]);
    expect(decideJob({ kind: "delete", name: "j", by: "bob" }, given(submitted, assigned, requested, cancelled))).toEqual([]);
  });

  it("keeps its exit code only when its process exited", () => {
    const state = given(submitted, assigned, ev("ephemera.job.failed.v1", { exitCode: 0, reason: "pod-lost", message: "pod g-1 lost" }));
    expect(state).toMatchObject({ phase: "Failed", reason: "pod-lost", queuedPosition: 1, assignedPosition: 2, startedAt: "t1", endedAt: "t2" });
    expect("exitCode" in state).toBe(false);
  });
});
