// The jobs' metrics on the sandbox service's registry: each group's queue depth (counted from
// the job projection at each scrape), how long jobs waited for a pod and ran, per group, and
// the jobs ended by state. The histograms and the counter see the job events as they are
// written from the service's start on (a restart does not count the past again).
import { Aggregates } from "@ephemera/events";
import { Counter, DURATION_BUCKETS, Gauge, Histogram, type Registry } from "@ephemera/kit/metrics";
import type { SandboxCore } from "../service.js";
import { isEnded } from "./state.js";

/** A wait or a run may last hours: the duration buckets, then 2 h, 6 h and a day. */
const JOB_BUCKETS = [...DURATION_BUCKETS, 7200, 21_600, 86_400];
const ENDED = new Set(["ephemera.job.succeeded.v1", "ephemera.job.failed.v1", "ephemera.job.cancelled.v1"]);

const seconds = (from: string, to: string) => Math.max(0, (Date.parse(to) - Date.parse(from)) / 1000);

/** Call after the core's start (its replay): the events counted are those written from now on. */
export function jobMetrics(registry: Registry, core: Pick<SandboxCore, "jobs" | "jobRunnerGroupStates" | "jobStates" | "feed">): void {
  new Gauge({
    name: "ephemera_job_queue_depth", labelNames: ["group"], registers: [registry],
    help: "Jobs queued (waiting for a pod), by job runner group; 0 for a group with none",
    collect() {
      const counts = new Map<string, number>();
      for (const [name, { state }] of core.jobRunnerGroupStates.entries()) if (state.status === "active") counts.set(name, 0);
      for (const job of core.jobs.records()) {
        if (job.phase === "Queued") counts.set(job.spec.runnerGroup, (counts.get(job.spec.runnerGroup) ?? 0) + 1);
      }
      this.reset();
      for (const [group, n] of counts) this.set({ group }, n);
    },
  });
  const wait = new Histogram({
    name: "ephemera_job_wait_seconds", labelNames: ["group"], registers: [registry], buckets: JOB_BUCKETS,
    help: "How long a job waited in its group's queue, from its submit to its assignment to a pod",
  });
  const run = new Histogram({
    name: "ephemera_job_run_seconds", labelNames: ["group"], registers: [registry], buckets: JOB_BUCKETS,
    help: "How long a job ran, from its assignment to a pod to its end (jobs that ran only)",
  });
  const ended = new Counter({
    name: "ephemera_jobs_ended_total", labelNames: ["group", "state"], registers: [registry],
    help: "Jobs ended, by job runner group and state (Succeeded, Failed, Cancelled)",
  });
  core.feed.onCommit((c) => {
    if (c.aggregate !== Aggregates.job) return;
    const job = core.jobStates.get(c.aggregateId)?.state;
    if (job?.status !== "job") return;
    const group = job.spec.runnerGroup;
    for (const e of c.events) {
      if (e.type === "ephemera.job.assigned.v1" && job.startedAt) wait.observe({ group }, seconds(job.queuedAt, job.startedAt));
      if (ENDED.has(e.type) && isEnded(job)) {
        ended.inc({ group, state: job.phase });
        if (job.startedAt) run.observe({ group }, seconds(job.startedAt, job.endedAt));
      }
    }
  });
}
