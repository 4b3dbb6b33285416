// The JobRunnerGroupView of the API. Until the runner reports the group's pods, a group is
// Pending: the service knows what was asked for, not what runs.
import * as pb from "@ephemera/proto";
import type { JobRunnerGroupRecord } from "./state.js";

export function jobRunnerGroupView(group: JobRunnerGroupRecord): pb.JobRunnerGroupView {
  const desiredPods = group.spec.scaling?.manual?.desiredPods ?? 1;
  const status = group.status === "deleted"
    ? { ready: false, reason: "Deleted", message: "", desiredPods }
    : { ready: false, reason: "Pending", message: `waiting for the runner of cluster ${group.spec.cluster} to report ${desiredPods} ready pod${desiredPods === 1 ? "" : "s"}`, desiredPods };
  return pb.JobRunnerGroupView.fromPartial({
    name: group.name, spec: group.spec, status, createdAt: group.createdAt, updatedAt: group.updatedAt,
  });
}
