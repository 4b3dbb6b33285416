// The job decider: submit, assign to a pod, finish, delete (cancel). A job is immutable once
// submitted; it runs on at most one pod, once; an ended job takes no further event.
import type * as pb from "@ephemera/proto";
import { ev, type DomainEvent } from "@ephemera/events";
import { ConflictError, NotFoundError } from "@ephemera/kit";
import { isEnded, type JobState } from "./state.js";

export type JobOutcome = "succeeded" | "failed" | "cancelled";

export type JobCommand =
  | { kind: "submit"; name: string; spec: pb.JobSpec; submitter: string; routingKey: string }
  | { kind: "assign"; name: string; pod: string }
  | { kind: "finish"; name: string; pod: string; outcome: JobOutcome; exitCode: number; reason: string; message: string }
  | { kind: "delete"; name: string; by: string }
  /** An artifact its pod stored (artifacts.ts): recorded while the job runs on that pod. */
  | { kind: "artifact"; name: string; pod: string; path: string; size: number; sha256: string; meta: Record<string, string> }
  /** The server's own word: the pod did not report within the grace after a cancel, or was lost. */
  | { kind: "expire"; name: string; outcome: "failed" | "cancelled"; reason: string; message: string };

export function decideJob(command: JobCommand, state: JobState): DomainEvent[] {
  if (command.kind === "submit") {
    if (state.status !== "none") throw new ConflictError(`job ${command.name} already exists`);
    const { name, spec, submitter, routingKey } = command;
    return [ev("ephemera.job.submitted.v1", { name, spec, submitter, routingKey })];
  }
  if (state.status === "none") throw new NotFoundError(`job ${command.name} not found`);
  switch (command.kind) {
    case "assign":
      if (state.phase !== "Queued") throw new ConflictError(`job ${command.name} is ${state.phase}, not Queued: it cannot be assigned`);
      return [ev("ephemera.job.assigned.v1", { pod: command.pod })];
    case "finish": {
      // A repeated Finish of an ended job is answered as done (the pod retries).
      if (isEnded(state)) return [];
      if (state.phase !== "Running" || state.pod !== command.pod) {
        throw new ConflictError(`job ${command.name} is not running on pod ${command.pod}`);
      }
      const { exitCode, reason, message } = command;
      if (command.outcome === "succeeded") return [ev("ephemera.job.succeeded.v1", { exitCode, reason, message })];
      if (command.outcome === "failed") return [ev("ephemera.job.failed.v1", { exitCode, reason, message })];
      return [ev("ephemera.job.cancelled.v1", { reason: message || "stopped by its pod after a cancel" })];
    }
    case "delete":
      if (isEnded(state)) return [];
      if (state.phase === "Queued") return [ev("ephemera.job.cancelled.v1", { reason: `deleted by ${command.by} while queued` })];
      if (state.cancelRequestedBy !== undefined) return [];
      return [ev("ephemera.job.cancel_requested.v1", { by: command.by })];
    case "artifact": {
      if (state.phase !== "Running" || state.pod !== command.pod) throw new ConflictError(`job ${command.name} is not running on pod ${command.pod}`);
      const { path, size, sha256, meta } = command;
      return [ev("ephemera.job.artifact_stored.v1", { path, size, sha256, meta })];
    }
    case "expire":
      if (isEnded(state)) return [];
      if (command.outcome === "cancelled") return [ev("ephemera.job.cancelled.v1", { reason: command.message })];
      return [ev("ephemera.job.failed.v1", { exitCode: 0, reason: command.reason, message: command.message })];
  }
}
