import { podOutcome, type PodStatus } from "./outcome.js";

const graces = { imagePullMs: 60_000, unknownMs: 30_000 };
const term = (name: string, exitCode: number, reason?: string) => ({ name, state: { terminated: { exitCode, ...(reason ? { reason } : {}) } } });
const wait = (name: string, reason: string, message?: string) => ({ name, state: { waiting: { reason, ...(message ? { message } : {}) } } });

describe("what a runner pod's status says", () => {
  const cases: Array<[string, PodStatus, number, ReturnType<typeof podOutcome>]> = [
    ["still running: nothing yet", { phase: "Running", containerStatuses: [{ name: "main", state: { running: {} } }] }, 0, undefined],
    ["succeeded", { phase: "Succeeded", containerStatuses: [term("main", 0), term("ephemera-sidecar", 0)] }, 0, { kind: "Succeeded" }],
    ["the script failed: its exit code", { phase: "Failed", containerStatuses: [term("main", 3), term("ephemera-sidecar", 0)] }, 0,
      { kind: "Failed", exitCode: 3, message: "script exited with code 3" }],
    ["the init agent failed", { phase: "Failed", initContainerStatuses: [term("ephemera-init", 1)] }, 0,
      { kind: "Failed", exitCode: 1, message: "init container ephemera-init exited with code 1" }],
    ["OOMKilled", { phase: "Failed", containerStatuses: [term("main", 137, "OOMKilled")] }, 0,
      { kind: "OOMKilled", message: "container main was killed for using too much memory (OOMKilled)" }],
    ["evicted", { phase: "Failed", reason: "Evicted", message: "The node was low on resource: memory." }, 0,
      { kind: "Evicted", message: "The node was low on resource: memory." }],
    ["past activeDeadlineSeconds", { phase: "Failed", reason: "DeadlineExceeded", message: "Pod was active on the node longer than the specified deadline" }, 0,
      { kind: "DeadlineExceeded", message: "Pod was active on the node longer than the specified deadline" }],
    ["a missing secret", { phase: "Pending", containerStatuses: [wait("main", "CreateContainerConfigError", 'secret "db" not found')] }, 0,
      { kind: "ConfigError", message: 'container main: CreateContainerConfigError: secret "db" not found' }],
    ["an image pull failing, within its grace: nothing yet", { phase: "Pending", containerStatuses: [wait("main", "ImagePullBackOff")] }, 59_999, undefined],
    ["an image pull failing past its grace", { phase: "Pending", containerStatuses: [wait("main", "ErrImagePull", "not found")] }, 60_000,
      { kind: "ImagePullFailed", message: "container main: ErrImagePull: not found" }],
    ["Unknown within its grace: nothing yet", { phase: "Unknown" }, 29_999, undefined],
    ["Unknown past its grace: the node is lost", { phase: "Unknown" }, 30_000, { kind: "NodeLost", message: "the pod's node stopped reporting (phase Unknown)" }],
  ];
  it.each(cases)("%s", (_, status, elapsed, expected) => {
    expect(podOutcome(status, 1_000_000 + elapsed, 1_000_000, graces)).toEqual(expected);
  });
});
