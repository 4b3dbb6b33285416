// The status a user sees, derived from the sandbox's state: never stored, always folded.
import type * as pb from "@ephemera/proto";
import type { SandboxState } from "@ephemera/events";

export function sandboxStatus(s: SandboxState): pb.SandboxStatus {
  if (s.status === "deleted") return { ready: false, reason: "Deleted", message: "sandbox deleted" };
  if (s.status === "deleting") {
    const failed = s.resources.filter((r) => r.status === "DeprovisionFailed");
    const pending = s.resources.filter((r) => r.status === "Deprovisioning");
    if (failed.length && !pending.length) {
      return { ready: false, reason: "DeprovisionFailed", message: failed.map((r) => `resource ${r.name}: ${describeFailure(r.failure)}`).join("; ") };
    }
    return { ready: false, reason: "Deleting", message: pending.length ? `deprovisioning ${pending.map((r) => r.name).join(", ")}` : "deleting" };
  }
  const failed = s.resources.filter((r) => r.status === "Failed");
  if (failed.length) {
    return { ready: false, reason: "ResourceFailed", message: failed.map((r) => `resource ${r.name}: ${describeFailure(r.failure)}`).join("; ") };
  }
  if (s.ready) return { ready: true, reason: "Ready", message: "all resources are ready" };
  const waiting = s.resources.filter((r) => r.status !== "Ready").map((r) => r.name);
  return { ready: false, reason: "Creating", message: `waiting for resource${waiting.length > 1 ? "s" : ""} ${waiting.join(", ")}` };
}

export function describeFailure(f: pb.StepFailure | undefined): string {
  if (!f) return "failed";
  const code = f.exitCode !== undefined ? ` exited ${f.exitCode}` : "";
  return `step ${f.step}${code} (${f.reason})${f.message ? `: ${f.message}` : ""}`;
}
