import * as pb from "@ephemera/proto";
import { EXIT_FAILED, EXIT_PERMISSION_DENIED, EXIT_UNAUTHENTICATED, EXIT_USAGE } from "./errors.js";
import { STATUS_EXIT_REFUSED, STATUS_EXIT_UNKNOWN, condition, statusErrorExit, statusLine } from "./status.js";

const view = (reason: string, ready = false) => pb.SandboxView.fromPartial({ name: "sb", status: { ready, reason, message: "m" } });

describe("get-status's reading of a sandbox", () => {
  it.each([
    ["Ready", true, "ready"],
    ["ResourceFailed", false, "failed"],
    ["DeprovisionFailed", false, "failed"],
    ["RenderError", false, "failed"],
    ["BaselineNotFound", false, "failed"],
    ["PatchFailed", false, "failed"],
    ["Rejected", false, "failed"],
    ["Deleted", false, "not-found"],
    ["Creating", false, "pending"],
    ["NoRunner", false, "pending"],
    ["Deleting", false, "pending"],
    ["", false, "pending"],
  ] as const)("%s (ready %s) is %s", (reason, ready, expected) => {
    expect(condition(view(reason, ready))).toBe(expected);
  });

  it("prints ready, or the reason and the message on one line", () => {
    expect(statusLine({ name: "sb", ready: true, reason: "Ready", message: "all resources are ready" })).toBe("ready\n");
    const failed = { name: "sb", ready: false, reason: "ResourceFailed", message: "resource db: step x exited 1 (Error): two\n  lines\n" };
    expect(statusLine(failed))
      .toBe("ResourceFailed: resource db: step x exited 1 (Error): two lines\n");
  });
});

describe("get-status's exit code when it cannot answer", () => {
  it("is 4 for a call the API refused, 5 for anything else: never 1 to 3, its answers", () => {
    expect(statusErrorExit(EXIT_UNAUTHENTICATED)).toBe(STATUS_EXIT_REFUSED);
    expect(statusErrorExit(EXIT_PERMISSION_DENIED)).toBe(STATUS_EXIT_REFUSED);
    expect(statusErrorExit(EXIT_USAGE)).toBe(STATUS_EXIT_UNKNOWN);
    expect(statusErrorExit(EXIT_FAILED)).toBe(STATUS_EXIT_UNKNOWN);
    expect(statusErrorExit(0)).toBe(0);
  });
});
