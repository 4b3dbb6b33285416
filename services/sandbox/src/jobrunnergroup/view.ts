// The JobRunnerGroupView of the API: what was asked for (the spec) and what runs, as the
// runner of the group's cluster reports its ready pods (aggregate jobpods.<group>). Until
// the runner reports, or while fewer pods than desiredPods are ready, a group is Pending.
import * as pb from "@ephemera/proto";
import type { DomainEvent } from "@ephemera/events";
import type { JobRunnerGroupRecord } from "./state.js";

/** The runner's last report of a group's ready pods; undefined before the first. */
export type GroupPodsReport = { ready: number; pods: string[] } | undefined;

export function foldGroupPods(state: GroupPodsReport, event: DomainEvent): GroupPodsReport {
  return event.type === "ephemera.jobrunnergroup.pods_reported.v1" ? { ready: event.data.ready, pods: [...event.data.pods] } : state;
}

export function jobRunnerGroupView(group: JobRunnerGroupRecord, report?: GroupPodsReport): pb.JobRunnerGroupView {
  const desiredPods = group.spec.scaling?.manual?.desiredPods ?? 1;
  return pb.JobRunnerGroupView.fromPartial({
    name: group.name, spec: group.spec, status: { ...groupStatus(group, desiredPods, report), desiredPods, pods: report?.pods ?? [] },
    createdAt: group.createdAt, updatedAt: group.updatedAt,
  });
}

function groupStatus(group: JobRunnerGroupRecord, desiredPods: number, report: GroupPodsReport) {
  if (group.status === "deleted") return { ready: false, reason: "Deleted", message: "", readyPods: report?.ready ?? 0 };
  if (!report) {
    const message = `waiting for the runner of cluster ${group.spec.cluster} to report ${desiredPods} ready pod${desiredPods === 1 ? "" : "s"}`;
    return { ready: false, reason: "Pending", message, readyPods: 0 };
  }
  const ready = report.ready >= desiredPods;
  return { ready, reason: ready ? "Ready" : "Pending", message: `${report.ready}/${desiredPods} pods ready`, readyPods: report.ready };
}
