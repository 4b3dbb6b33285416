import * as pb from "@ephemera/proto";
import { EVENT_TYPES, decode, dispatchCodec, encode, ev, parseRunId, redact, runId, workflowId, type DomainEvent, type StoredEvent } from "./index.js";

const recorded = (e: DomainEvent, time = "2026-01-01T00:00:00.000Z"): StoredEvent => ({ ...encode(e), time });

describe("events", () => {
  it("every event type survives encode → JSON → decode", () => {
    for (const type of EVENT_TYPES) {
      const e = ev(type, {});
      const back = decode(JSON.parse(JSON.stringify(recorded(e))) as StoredEvent);
      expect(back).toEqual(e);
    }
    const rich = ev("ephemera.steprun.succeeded.v1", { runId: "r", outputs: [{ name: "host", value: Buffer.from("db-1") }], durationMs: 12 });
    expect(decode(JSON.parse(JSON.stringify(recorded(rich))) as StoredEvent)).toEqual(rich);
  });

  it("stores payloads as canonical proto3 JSON: camelCase, defaults omitted, bytes base64", () => {
    const e = encode(ev("ephemera.steprun.succeeded.v1", { runId: "r", workflowId: "", outputs: [{ name: "host", value: Buffer.from("db-1") }] }));
    expect(e.data).toEqual({ runId: "r", outputs: [{ name: "host", value: Buffer.from("db-1").toString("base64") }] });
  });

  it("keeps a step timeout of 365 days whole in events and dispatches (JSON, not the uint32 binary form, which would wrap past 49.7 days)", () => {
    const timeoutMs = 365 * 86_400_000;
    const started = ev("ephemera.workflow.started.v1", { steps: [{ name: "s", dependsOn: [], timeoutMs, retries: 0 }] });
    const back = decode(JSON.parse(JSON.stringify(recorded(started))) as StoredEvent);
    expect(back?.type === "ephemera.workflow.started.v1" && back.data.steps[0]?.timeoutMs).toBe(timeoutMs);
    expect(dispatchCodec.decode(dispatchCodec.encode(pb.StepDispatch.fromPartial({ timeoutMs }))).timeoutMs).toBe(timeoutMs);
  });

  it("ignores event types it does not know", () => {
    expect(decode({ ...recorded(ev("ephemera.sandbox.ready.v1", {})), type: "ephemera.sandbox.renamed.v9" })).toBeUndefined();
  });

  it("redacts output values to sizes and leaves other events alone", () => {
    const e = recorded(ev("ephemera.steprun.succeeded.v1", { outputs: [{ name: "password", value: Buffer.from("hunter22") }] }));
    expect((redact(e).data as { outputs: unknown }).outputs).toEqual([{ name: "password", size: 8 }]);
    expect(JSON.stringify(redact(e))).not.toContain(Buffer.from("hunter22").toString("base64"));
    const other = recorded(ev("ephemera.sandbox.ready.v1", {}));
    expect(redact(other)).toBe(other);
  });

  it("builds and parses run ids", () => {
    const wf = workflowId("rk1", "db", "delete");
    expect(runId(wf, "deprovision", 2)).toBe("rk1.db.delete.deprovision.2");
    expect(parseRunId("rk1.db.delete.deprovision.2")).toEqual({
      workflowId: "rk1.db.delete", routingKey: "rk1", resource: "db", phase: "delete", step: "deprovision", attempt: 2,
    });
    for (const bad of ["rk1.db.update.s.1", "rk1.db.create.s.0", "rk1.db.create.s", "a.b.create.s.x"]) expect(parseRunId(bad)).toBeUndefined();
  });
});
