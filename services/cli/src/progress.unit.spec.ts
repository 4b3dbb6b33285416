import * as pb from "@ephemera/proto";
import { describeFailure, progress, stillWaitingFor, words, type Seen } from "./progress.js";

const view = (resources: Partial<pb.ResourceView>[]) =>
  pb.SandboxView.fromPartial({ name: "sb", status: { reason: "Creating" }, resources });
const step = (name: string, status: string, extra: Partial<pb.StepView> = {}) =>
  pb.StepView.fromPartial({ name, phase: "create", status, attempt: 1, ...extra });

describe("progress", () => {
  it("reports each step and resource change once, and stays quiet about what is pending", () => {
    let seen: Seen = new Map();
    const lines: string[] = [];
    for (const v of [
      view([{ name: "db", status: "Pending", steps: [step("provision", "Pending"), step("seed", "Pending")] }]),
      view([{ name: "db", status: "Provisioning", steps: [step("provision", "Running"), step("seed", "Pending")] }]),
      view([{ name: "db", status: "Provisioning", steps: [step("provision", "Running"), step("seed", "Pending")] }]),
      view([{ name: "db", status: "Provisioning", steps: [step("provision", "Succeeded"), step("seed", "Running", { attempt: 2 })] }]),
      view([{ name: "db", status: "Ready", steps: [step("provision", "Succeeded"), step("seed", "Succeeded", { attempt: 2 })] }]),
    ]) {
      const next = progress(seen, v);
      seen = next.seen;
      lines.push(...next.lines);
    }
    expect(lines).toEqual([
      "db: provision running",
      "db: provisioning",
      "db: provision succeeded",
      "db: seed running (attempt 2)",
      "db: seed succeeded (attempt 2)",
      "db: ready",
    ]);
  });

  it("reports each fork's change once, after the resources, with why it is not available yet", () => {
    const withFork = (status: string, message: string) => pb.SandboxView.fromPartial({
      name: "sb", resources: [{ name: "db", status: "Ready" }], workloads: [{ kind: "fork", name: "deployment/orders", status, message }, { kind: "local", name: "api", status: "Disconnected" }],
    });
    let seen: Seen = new Map();
    const lines: string[] = [];
    for (const v of [
      withFork("Pending", "created once every resource is ready"),
      withFork("Applying", "asked of cluster c1's runner"),
      withFork("Progressing", "applied to cluster c1; waiting for it to be available"),
      withFork("Progressing", "applied to cluster c1; waiting for it to be available"),
      withFork("Available", "fork of Deployment shop/orders"),
    ]) {
      const next = progress(seen, v, seen.size === 0);
      seen = next.seen;
      lines.push(...next.lines);
    }
    expect(lines).toEqual([
      "fork deployment/orders: applying (asked of cluster c1's runner)",
      "fork deployment/orders: progressing (applied to cluster c1; waiting for it to be available)",
      "fork deployment/orders: available",
    ]);
    expect(stillWaitingFor(withFork("Progressing", "applied"), "ready")).toBe("fork deployment/orders (progressing: applied)");
  });

  it("of a first view, reports only what is running", () => {
    const { lines } = progress(new Map(), view([
      { name: "db", status: "Deprovisioning", steps: [step("provision", "Succeeded"), step("deprovision", "Running", { phase: "delete" })] },
    ]));
    expect(lines).toEqual(["db: deprovision running"]);
  });

  it("of a sandbox this command created, reports the first view's every step and resource that is not pending", () => {
    const v = view([{ name: "db", status: "Failed", steps: [step("provision", "Failed", { exitCode: 3 }), step("seed", "Pending")] }]);
    expect(progress(new Map(), v, true, "none").lines).toEqual(["db: provision failed (exit code 3)", "db: failed"]);
    expect(progress(new Map(), v).lines).toEqual([]);
    // On their way: a step waiting for a runner and a resource provisioning get their lines as they go on.
    const early = view([{ name: "db", status: "Provisioning", steps: [step("provision", "Succeeded"), step("seed", "Queued")] }]);
    const first = progress(new Map(), early, true, "none");
    expect(first.lines).toEqual(["db: provision succeeded"]);
    const later = view([{ name: "db", status: "Ready", steps: [step("provision", "Succeeded"), step("seed", "Succeeded")] }]);
    expect(progress(first.seen, later, false, "none").lines).toEqual(["db: seed succeeded", "db: ready"]);
  });

  it("waiting for a delete, takes the first view's create steps as history and its delete steps as news", () => {
    const v = view([{
      name: "db", status: "Deprovisioned",
      steps: [step("provision", "Succeeded"), step("deprovision", "Succeeded", { phase: "delete" }), step("cleanup", "Pending", { phase: "delete" })],
    }]);
    expect(progress(new Map(), v, true, "create").lines).toEqual(["db: deprovision succeeded"]);
  });

  it("says why a step waits: a retry's backoff, or no runner taking it", () => {
    const first = progress(new Map(), view([{ name: "db", status: "Provisioning", steps: [step("provision", "Running")] }]));
    const retrying = progress(first.seen, view([{ name: "db", status: "Provisioning", steps: [
      step("provision", "Retrying", { message: "attempt 1 failed (Error); next attempt at 2026-01-01T00:00:02.000Z" }),
    ] }]));
    expect(retrying.lines).toEqual(["db: provision retrying: attempt 1 failed (Error); next attempt at 2026-01-01T00:00:02.000Z"]);
    const unclaimed = progress(retrying.seen, view([{ name: "db", status: "Provisioning", steps: [
      step("provision", "Queued", { attempt: 2, message: "no runner for cluster far has taken it" }),
    ] }]));
    expect(unclaimed.lines).toEqual(["db: provision queued (attempt 2): no runner for cluster far has taken it"]);
  });

  it("names the exit code of a failed step", () => {
    const { lines } = progress(new Map([["db", "Provisioning"]]), view([{ name: "db", status: "Failed", steps: [step("seed", "Failed", { exitCode: 3 })] }]));
    expect(lines).toEqual(["db: seed failed (exit code 3)", "db: failed"]);
  });
});

describe("stillWaitingFor", () => {
  it("lists the resources not there yet with their busy steps", () => {
    const v = view([
      { name: "db", status: "Provisioning", steps: [step("provision", "Succeeded"), step("seed", "Running")] },
      { name: "cache", status: "Ready" },
      { name: "queue", status: "" },
    ]);
    expect(stillWaitingFor(v, "ready")).toBe("db (provisioning, seed running); queue (pending)");
    expect(stillWaitingFor(undefined, "ready")).toBe("the first state of the sandbox");
  });
});

describe("describeFailure", () => {
  it("names the step, its exit code, reason, message and log tail", () => {
    const text = describeFailure(pb.ResourceView.fromPartial({
      name: "db",
      status: "Failed",
      steps: [step("seed", "Failed", { exitCode: 3 })],
      failure: { step: "seed", exitCode: 3, reason: "Error", message: "script exited with 3", logTail: "connecting\nno route to host\n" },
    }));
    expect(text).toBe([
      "resource db failed at step seed (create)",
      "  exit code: 3",
      "  reason:    Error",
      "  message:   script exited with 3",
      "  log tail:",
      "    | connecting",
      "    | no route to host",
    ].join("\n"));
  });
});

describe("words", () => {
  it("splits status names", () => {
    expect(words("DeprovisionFailed")).toBe("deprovision failed");
  });
});
