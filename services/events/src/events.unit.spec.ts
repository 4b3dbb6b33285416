import * as pb from "@ephemera/proto";
import { EVENT_TYPES, decode, decoder, dispatchCodec, encode, ev, parseRunId, redact, runId, workflowId, type DomainEvent, type StoredEvent } from "./index.js";

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

  describe("upcasting", () => {
    // As if steprun.failed had once been stored flat (v0) and again under a type renamed since.
    const flatToNested = {
      to: "ephemera.steprun.failed.v1",
      upcast: (data: unknown) => {
        const { runId, reason, message, ...rest } = data as { runId: string; reason: string; message: string };
        return { ...rest, runId, failure: { runId, reason, message } };
      },
    };
    const decodeOld = decoder({
      "ephemera.steprun.failed.v0": flatToNested,
      "ephemera.steprun.broke.v0": { to: "ephemera.steprun.failed.v0", upcast: (data) => data },
    });
    const stored = { type: "ephemera.steprun.failed.v0", data: { runId: "r.1", step: "s", reason: "Error", message: "exit 3" } };

    it("reads an event stored under an older version as the current one, before any fold sees it", () => {
      expect(decodeOld(stored)).toEqual(ev("ephemera.steprun.failed.v1", {
        runId: "r.1", step: "s", failure: { runId: "r.1", reason: "Error", message: "exit 3" },
      }));
      expect(stored.data).toEqual({ runId: "r.1", step: "s", reason: "Error", message: "exit 3" });
    });

    it("chains upcasters across versions, and still skips a type none of them reaches", () => {
      expect(decodeOld({ ...stored, type: "ephemera.steprun.broke.v0" })?.type).toBe("ephemera.steprun.failed.v1");
      expect(decodeOld({ ...stored, type: "ephemera.steprun.failed.v7" })).toBeUndefined();
      expect(decode(stored)).toBeUndefined();
    });

    it("fails loudly on upcasters that go round in a cycle", () => {
      const loop = decoder({ "x.v1": { to: "x.v2", upcast: (d) => d }, "x.v2": { to: "x.v1", upcast: (d) => d } });
      expect(() => loop({ type: "x.v1", data: {} })).toThrow("cycle");
    });
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
