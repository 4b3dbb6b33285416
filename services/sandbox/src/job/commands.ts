// The job commands behind the API (submit, get, list, delete) over the job projection, and
// what the server does by itself: a running job whose pod was told to stop it and did not
// report within the grace ends Cancelled; a group's deletion cancels its queued jobs and asks
// the pods of its running ones to stop them; a running job whose pod has not reported its end
// by the group's jobTimeout and a grace ends Failed, reason timeout.
import * as pb from "@ephemera/proto";
import { encode } from "@ephemera/events";
import { execute, type CommandMeta, type EventStore, type Projection } from "@ephemera/eventstore";
import { NotFoundError, errorMessage, parseDuration, type Logger } from "@ephemera/kit";
import { jobToDoc, validateJob } from "@ephemera/spec";
import { decideJob, type JobCommand } from "./decide.js";
import { isEnded, type JobRecord, type JobState } from "./state.js";
import { jobView } from "./view.js";

/** How long a pod has to report a job it was told to cancel before the server ends it. */
export const CANCEL_GRACE_MS = 10_000;
/** How long past the group's jobTimeout a pod has to report a job (its own kill and Finish) before the server fails it. */
export const TIMEOUT_GRACE_MS = 60_000;
const DEFAULT_JOB_TIMEOUT = "30m";

export interface JobDeps {
  store: EventStore;
  projection: Projection<JobState>;
  /** Whether a job runner group exists now. */
  groupExists: (name: string) => boolean;
  /** The routing key of a sandbox or route group that exists now; undefined otherwise. */
  routingKeyOf: (kind: "sandbox" | "routegroup", name: string) => string | undefined;
  /** A random suffix for generated names. */
  random: () => string;
  logger: Logger;
  now?: () => number;
  cancelGraceMs?: number;
  /** The job runner group's jobTimeout text, when the group exists (default 30m). */
  groupTimeout?: (group: string) => string | undefined;
  timeoutGraceMs?: number;
  /** Whether this replica applies the timers and rules (holds the timers' lease); absent: always. */
  acting?: () => boolean;
}

export class Jobs {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  /** The jobTimeout deadline of each running job. */
  private readonly deadlines = new Map<string, NodeJS.Timeout>();
  private readonly now: () => number;
  private stopped = false;

  constructor(private readonly deps: JobDeps) {
    this.now = deps.now ?? Date.now;
  }

  async submit(request: pb.Job | undefined, submitter: string, meta: CommandMeta): Promise<pb.JobView> {
    const job = validateJob(jobToDoc(pb.Job.fromPartial({ spec: request?.spec ?? {} })));
    const spec = job.spec!;
    if (!this.deps.groupExists(spec.runnerGroup)) throw new NotFoundError(`spec.runnerGroup: job runner group ${spec.runnerGroup} not found`);
    const routingKey = this.resolveRoutingKey(spec.routingContext);
    const name = `${spec.namePrefix || "job"}-${this.deps.random()}`;
    await this.run({ kind: "submit", name, spec, submitter, routingKey }, { ...meta, command: "submit" });
    return this.get(name);
  }

  get(name: string): pb.JobView {
    return jobView(this.record(name));
  }

  record(name: string): JobRecord {
    const state = this.deps.projection.get(name)?.state;
    if (!state || state.status === "none") throw new NotFoundError(`job ${name} not found`);
    return state;
  }

  /** Queued and running jobs (every job with `all`), in the order they were submitted. */
  list(all: boolean): pb.JobView[] {
    return [...this.records()].filter((j) => all || !isEnded(j)).sort((a, b) => a.queuedPosition - b.queuedPosition).map(jobView);
  }

  async delete(name: string, by: string, meta: CommandMeta): Promise<pb.JobView> {
    this.record(name);
    await this.run({ kind: "delete", name, by }, { ...meta, command: "delete" });
    return this.get(name);
  }

  *records(): Iterable<JobRecord> {
    for (const [, { state }] of this.deps.projection.entries()) if (state.status === "job") yield state;
  }

  /** Applies the server's own rules to every job (after the replay at start). */
  async reconcileAll(): Promise<void> {
    for (const job of [...this.records()]) await this.reconcile(job.name);
  }

  /** Applies the server's own rules to one job after it changed. */
  async reconcile(name: string): Promise<void> {
    const job = this.deps.projection.get(name)?.state;
    if (!job || job.status === "none" || this.stopped || this.deps.acting?.() === false) return;
    if (isEnded(job)) return this.clearTimer(name);
    if (job.phase === "Queued" && !this.deps.groupExists(job.spec.runnerGroup)) {
      return this.expire({ kind: "expire", name, outcome: "cancelled", reason: "cancelled", message: `job runner group ${job.spec.runnerGroup} was deleted` });
    }
    if (job.phase === "Running") this.armDeadline(job);
    if (job.phase === "Running" && !job.cancelRequestedAt && !this.deps.groupExists(job.spec.runnerGroup)) {
      // Its pod is told to stop it (the JobAgent server sends the cancel); the cancel grace below follows.
      return this.expire({ kind: "delete", name, by: `the deletion of job runner group ${job.spec.runnerGroup}` });
    }
    if (job.phase === "Running" && job.cancelRequestedAt && !this.timers.has(name)) {
      const grace = this.deps.cancelGraceMs ?? CANCEL_GRACE_MS;
      const wait = Math.max(0, Date.parse(job.cancelRequestedAt) + grace - this.now());
      const message = `pod ${job.pod} did not report the job within ${grace / 1000}s of its cancel`;
      const timer = setTimeout(() => {
        this.timers.delete(name);
        void this.expire({ kind: "expire", name, outcome: "cancelled", reason: "cancelled", message });
      }, wait);
      timer.unref();
      this.timers.set(name, timer);
    }
  }

  /** The jobs of one group's queue (for the order, see queue.ts). */
  *queued(group: string): Iterable<JobRecord> {
    for (const job of this.records()) if (job.phase === "Queued" && job.spec.runnerGroup === group) yield job;
  }

  stop(): void {
    this.stopped = true;
    this.pause();
  }

  /** Stops firing (another replica holds the timers' lease); reconcileAll() arms the timers again. */
  pause(): void {
    for (const timer of [...this.timers.values(), ...this.deadlines.values()]) clearTimeout(timer);
    this.timers.clear();
    this.deadlines.clear();
  }

  /**
   * A running job fails, reason timeout, when its pod has not reported it by the group's
   * jobTimeout (as it was when the timer was armed) and the grace, counted from its start:
   * so the timer is the same when re-armed after a restart.
   */
  private armDeadline(job: JobRecord): void {
    if (this.deadlines.has(job.name)) return;
    const text = this.deps.groupTimeout?.(job.spec.runnerGroup) || DEFAULT_JOB_TIMEOUT;
    const timeoutMs = parseDuration(text) ?? 30 * 60_000;
    const grace = this.deps.timeoutGraceMs ?? TIMEOUT_GRACE_MS;
    const wait = Math.max(0, Date.parse(job.startedAt) + timeoutMs + grace - this.now());
    const message = `ran past the group's jobTimeout (${text}): pod ${job.pod} did not report the job's end within ${grace / 1000}s after it`;
    const timer = setTimeout(() => {
      this.deadlines.delete(job.name);
      void this.expire({ kind: "expire", name: job.name, outcome: "failed", reason: "timeout", message });
    }, wait);
    timer.unref();
    this.deadlines.set(job.name, timer);
  }

  async run(command: JobCommand, meta: CommandMeta): Promise<void> {
    await execute(this.deps.store, this.deps.projection, command.name, (state) => decideJob(command, state).map(encode), meta);
  }

  private async expire(command: JobCommand): Promise<void> {
    try {
      await this.run(command, { source: "sandbox", command: command.kind });
    } catch (err) {
      this.deps.logger.warn({ job: command.name, err: errorMessage(err) }, "could not end a job");
    }
  }

  private clearTimer(name: string): void {
    for (const timers of [this.timers, this.deadlines]) {
      clearTimeout(timers.get(name));
      timers.delete(name);
    }
  }

  private resolveRoutingKey(context: pb.JobRoutingContext | undefined): string {
    if (context?.sandbox) {
      const key = this.deps.routingKeyOf("sandbox", context.sandbox);
      if (key === undefined) throw new NotFoundError(`spec.routingContext.sandbox: sandbox ${context.sandbox} not found`);
      return key;
    }
    if (context?.routegroup) {
      const key = this.deps.routingKeyOf("routegroup", context.routegroup);
      if (key === undefined) throw new NotFoundError(`spec.routingContext.routegroup: route group ${context.routegroup} not found`);
      return key;
    }
    return "";
  }
}
