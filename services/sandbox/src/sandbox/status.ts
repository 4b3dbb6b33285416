// The status a user sees, derived from the sandbox's state: never stored, always folded.
import type * as pb from "@ephemera/proto";
import type { WorkflowProgress } from "../workflow/progress.js";
import type { SandboxRecord } from "./state.js";
import { scheduledDeleteTime } from "./decide.js";

/** A stored sandbox that cannot be shown in full: the message names the field and what to do. */
export class UnrenderableError extends Error {
  override readonly name = "UnrenderableError";
}

/** The status of a sandbox; `workflows` are its resources' workflows (to tell a run no runner took). */
export function sandboxStatus(s: SandboxRecord, workflows: WorkflowProgress[] = []): pb.SandboxStatus {
  return { ...baseStatus(s, workflows), scheduledDeleteTime: s.status === "active" ? deletionTime(s) : "" };
}

/**
 * When TTL expiry deletes it, as RFC 3339. Validation keeps a TTL within 365 days; one an
 * older version accepted may end past the last time a Date holds (year 275760).
 */
function deletionTime(s: SandboxRecord): string {
  const due = scheduledDeleteTime(s);
  if (due === undefined) return "";
  const when = new Date(due);
  if (Number.isNaN(when.getTime())) {
    throw new UnrenderableError(`spec.ttl.duration: the TTL "${s.spec?.ttl?.duration ?? ""}" ends past the latest time a date can ` +
      "hold, so no deletion time can be shown (apply the sandbox again with a TTL of at most 365 days, or delete it)");
  }
  return when.toISOString();
}

function baseStatus(s: SandboxRecord, workflows: WorkflowProgress[]): Omit<pb.SandboxStatus, "scheduledDeleteTime"> {
  if (s.status === "deleted") return { ready: false, reason: "Deleted", message: "sandbox deleted" };
  if (s.status === "deleting") {
    if (s.deleteReason === "ttl") {
      const pending = s.resources.filter((r) => r.status === "Deprovisioning");
      if (pending.length || !s.resources.some((r) => r.status === "DeprovisionFailed")) {
        return { ready: false, reason: "Deleting", message: "the sandbox's TTL expired; deleting it" };
      }
    }
    const failed = s.resources.filter((r) => r.status === "DeprovisionFailed");
    const pending = s.resources.filter((r) => r.status === "Deprovisioning");
    if (failed.length && !pending.length) {
      return {
        ready: false, reason: "DeprovisionFailed",
        message: `${failed.map((r) => `resource ${r.name}: ${describeFailure(r.failure)}`).join("; ")} ` +
          "(delete it again to retry, or with --force to skip the teardown)",
      };
    }
    if (s.forks.failure) {
      return {
        ready: false, reason: s.forks.failure.reason,
        message: `the forks could not be removed from cluster ${s.cluster}: ${s.forks.failure.message} (delete it again to retry, or with --force to skip the teardown)`,
      };
    }
    if (!pending.length && s.forks.available < s.forks.requested) {
      return { ready: false, reason: "Deleting", message: `removing the forks from cluster ${s.cluster} before the resources` };
    }
    return { ready: false, reason: "Deleting", message: pending.length ? `deprovisioning ${pending.map((r) => r.name).join(", ")}` : "deleting" };
  }
  const failed = s.resources.filter((r) => r.status === "Failed");
  if (failed.length) {
    return { ready: false, reason: "ResourceFailed", message: failed.map((r) => `resource ${r.name}: ${describeFailure(r.failure)}`).join("; ") };
  }
  if (s.forks.failure) {
    const { fork, message } = s.forks.failure;
    return { ready: false, reason: s.forks.failure.reason, message: `${fork ? `fork of ${fork}: ` : "forks: "}${message} (fix it, then eph sandbox retry)` };
  }
  // Resources an update removed: the sandbox is what its spec says only once they are gone.
  const notRemoved = s.resources.filter((r) => r.status === "DeprovisionFailed");
  if (notRemoved.length) {
    return {
      ready: false, reason: "DeprovisionFailed",
      message: `${notRemoved.map((r) => `resource ${r.name} (removed by an update): ${describeFailure(r.failure)}`).join("; ")} ` +
        "(fix it, then eph sandbox retry runs its delete workflow again)",
    };
  }
  const removing = s.resources.filter((r) => r.status === "Deprovisioning").map((r) => r.name);
  if (s.ready && removing.length) return { ready: false, reason: "Updating", message: `removing resource${removing.length > 1 ? "s" : ""} ${removing.join(", ")}` };
  if (s.ready) return { ready: true, reason: "Ready", message: s.forks.requestedCount ? "all resources and forks are ready" : "all resources are ready" };
  const unclaimed = workflows.flatMap((w) => w.steps.filter((st) => st.unclaimed && st.status === "queued").map((st) => ({ w, st })));
  if (unclaimed.length) {
    const { w, st } = unclaimed[0]!;
    return {
      ready: false, reason: "NoRunner",
      message: `no runner for cluster ${st.unclaimed!.cluster} has taken step ${st.name} of resource ${w.started?.resource ?? "?"} ` +
        `(queued since before ${st.unclaimed!.since}); is a runner for that cluster up?`,
    };
  }
  const waiting = s.resources.filter((r) => r.status !== "Ready").map((r) => r.name);
  if (!waiting.length && s.forks.requested) return { ready: false, reason: "Creating", message: `waiting for the forks to be available on cluster ${s.cluster}` };
  return { ready: false, reason: "Creating", message: `waiting for resource${waiting.length > 1 ? "s" : ""} ${waiting.join(", ")}` };
}

export function describeFailure(f: pb.StepFailure | undefined): string {
  if (!f) return "failed";
  const code = f.exitCode !== undefined ? ` exited ${f.exitCode}` : "";
  return `step ${f.step}${code} (${f.reason})${f.message ? `: ${f.message}` : ""}`;
}
