// Which jobs a folded commit asks the server's own job rules to look at again.
import { Aggregates } from "@ephemera/events";
import type { Commit } from "@ephemera/eventstore";
import type { Jobs } from "./commands.js";

/** A job that changed, or the queued and running jobs of a group that changed (it may have gone away), meet the server's rules. */
export function reconcileJobs(jobs: Jobs, c: Commit): void {
  const names = c.aggregate === Aggregates.job
    ? [c.aggregateId]
    : c.aggregate === Aggregates.jobrunnergroup
      ? [...jobs.records()]
        .filter((j) => j.spec.runnerGroup === c.aggregateId && (j.phase === "Queued" || j.phase === "Running"))
        .map((j) => j.name)
      : [];
  for (const name of names) void jobs.reconcile(name);
}
