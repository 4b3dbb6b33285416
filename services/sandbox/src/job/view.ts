// The JobView of the API: the job as submitted and where it stands.
import * as pb from "@ephemera/proto";
import type { JobRecord } from "./state.js";

export function jobView(job: JobRecord): pb.JobView {
  const cancelling = job.phase === "Running" && job.cancelRequestedBy !== undefined;
  return pb.JobView.fromPartial({
    name: job.name, spec: job.spec, submitter: job.submitter, routingKey: job.routingKey,
    status: {
      state: job.phase, pod: job.pod, ...(job.exitCode !== undefined ? { exitCode: job.exitCode } : {}),
      reason: cancelling ? "cancel-requested" : job.reason,
      message: cancelling ? `deleted by ${job.cancelRequestedBy}; pod ${job.pod} is stopping it` : job.message,
      queuedAt: job.queuedAt, startedAt: job.startedAt, endedAt: job.endedAt,
      artifacts: job.artifacts ?? [],
    },
  });
}
