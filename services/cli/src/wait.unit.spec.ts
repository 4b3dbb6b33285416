import * as pb from "@ephemera/proto";
import { verdict } from "./wait.js";

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
