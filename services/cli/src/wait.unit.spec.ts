import * as pb from "@ephemera/proto";
import { verdict, waitForSandbox } from "./wait.js";

describe("the wait's verdict on a sandbox whose forks failed", () => {
  it.each(["BaselineNotFound", "PatchFailed", "ServiceNotFound", "OutputMissing", "OutputsTooLarge", "ForkUnavailable", "Rejected"])(
    "ends a wait for ready, or for gone, on %s",
    (reason) => {
      const view = pb.SandboxView.fromPartial({ name: "sb", status: { ready: false, reason } });
      expect(verdict(view, "ready")).toBe("failed");
      expect(verdict(view, "gone")).toBe("failed");
    },
  );
});

describe("a wait given the sandbox as it was before the command (a retry)", () => {
  const step = (status: string, attempt: number, exitCode?: number) =>
    pb.StepView.fromPartial({ name: "provision", phase: "create", status, attempt, ...(exitCode === undefined ? {} : { exitCode }) });
  const failed = pb.SandboxView.fromPartial({
    name: "sb", status: { ready: false, reason: "ResourceFailed" }, resources: [{ name: "db", status: "ProvisionFailed", steps: [step("Failed", 1, 3)] }],
  });
  const ready = pb.SandboxView.fromPartial({
    name: "sb", status: { ready: true, reason: "Ready" }, resources: [{ name: "db", status: "Ready", steps: [step("Succeeded", 2)] }],
  });
  /** A watch whose first view is already the end: the retried step ran before it opened. */
  const api = {
    watchSandbox: async (_name: string, onView: (v: pb.SandboxView) => boolean | void) => { onView(ready); return "end" as const; },
    getSandbox: async () => ready,
  };

  it("reports what changed since then, though the watch's first view came after the step ended", async () => {
    const lines: string[] = [];
    const result = await waitForSandbox(api, "sb", "ready", { timeoutMs: 5_000, log: (l) => lines.push(l), before: failed });
    expect(result.outcome).toBe("ready");
    expect(lines).toEqual(["db: provision succeeded (attempt 2)", "db: ready"]);
  });

  it("reports nothing of such a first view without it (all of it history)", async () => {
    const lines: string[] = [];
    expect((await waitForSandbox(api, "sb", "ready", { timeoutMs: 5_000, log: (l) => lines.push(l) })).outcome).toBe("ready");
    expect(lines).toEqual([]);
  });
});
