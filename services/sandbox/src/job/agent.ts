// The JobAgent server: the pods of job runner groups take their group's jobs here, one at a
// time, send their output (into the log store, under `job.<name>`, and each stream apart under
// `job.<name>.stdout|stderr`) and artifacts (artifacts.ts) and say how each ended.
// Every call carries the pod's token (minted by the runner, services/kit/src/capability.ts);
// the pod is held to the group and name it names. The order jobs are given out is the
// group's fair queue (queue.ts). A pod whose Take stream ends while it runs a job, and that
// does not take again within the grace, loses the job ("pod <name> lost"); so does one that
// never takes again after the service restarts.
import * as pb from "@ephemera/proto";
import type { LogStore } from "@ephemera/eventstore";
import {
  KeyedLock, PermissionDeniedError, errorMessage, grpc, parseDuration, toServiceError, verifyPodCapability,
  type Logger, type ServiceBinding, type SigningKey,
} from "@ephemera/kit";
import type { Jobs } from "./commands.js";
import type { JobOutcome } from "./decide.js";
import { nextJob } from "./queue.js";
import { DEFAULT_ARTIFACT_MAX, artifactStatus, jobStreamLogId, putArtifact } from "./artifacts.js";
import type { ValueJournal } from "@ephemera/events";
import { isEnded, type JobRecord } from "./state.js";

/** How long a pod that lost its Take stream while running a job has to take again. */
export const POD_LOST_GRACE_MS = 30_000;
const DEFAULT_JOB_TIMEOUT = "30m";

/** Where a job's output is kept in the log store. */
export const jobLogId = (job: string) => `job.${job}`;
/** The output streams a job's log is also kept apart by (JobService.Logs reads these). */
export const JOB_STREAMS = ["stdout", "stderr"] as const;
export type JobStream = (typeof JOB_STREAMS)[number];
export { jobStreamLogId };

/** A server without a store for artifacts (one started without `values`) says so. */
export const PUT_ARTIFACT_UNIMPLEMENTED = "artifacts are not stored yet: PutArtifact is unimplemented (docs/jobs.md)";

export interface JobAgentDeps {
  jobs: Jobs;
  /** The job runner group's jobTimeout text, when the group exists. */
  groupTimeout: (group: string) => string | undefined;
  /** The keys that check the pods' tokens (the runner's signing keys). */
  keys: SigningKey[];
  logs: LogStore;
  /** Where artifacts are stored (the output journal); without it PutArtifact answers UNIMPLEMENTED. */
  values?: ValueJournal;
  /** The bound on one artifact's size (EPHEMERA_JOB_ARTIFACT_MAX). */
  artifactMaxBytes?: number;
  logger: Logger;
  podLostGraceMs?: number;
}

type TakeCall = grpc.ServerWritableStream<pb.TakeJobsRequest, pb.JobAssignment>;

interface Taker {
  group: string;
  pod: string;
  call: TakeCall;
  /** Cancels already sent on this stream, by job, so each is sent once per stream. */
  cancelled: Set<string>;
}

export class JobAgentServer {
  private readonly takers = new Map<string, Taker>();
  private readonly lost = new Map<string, NodeJS.Timeout>();
  private readonly lock = new KeyedLock();
  private stopped = false;

  constructor(private readonly deps: JobAgentDeps) {}

  binding(): ServiceBinding {
    const impl: pb.JobAgentServer = {
      take: (call) => { void this.take(call); },
      output: (call, callback) => {
        this.output(call).then(() => callback(null, {}), (err: unknown) => callback(toServiceError(err)));
      },
      putArtifact: (call, callback) => {
        const values = this.deps.values;
        if (!values) {
          call.resume();
          callback({ code: 12 /* UNIMPLEMENTED */, details: PUT_ARTIFACT_UNIMPLEMENTED });
          return;
        }
        putArtifact(call as AsyncIterable<pb.ArtifactChunk>, {
          jobs: this.deps.jobs, values, maxBytes: this.deps.artifactMaxBytes ?? DEFAULT_ARTIFACT_MAX,
          runningJob: (job, token) => this.runningJob(job, token),
        }).then((res) => callback(null, res), (err: unknown) => callback(artifactStatus(err, toServiceError)));
      },
      finish: (call, callback) => {
        this.finish(call.request).then(() => callback(null, {}), (err: unknown) => callback(toServiceError(err)));
      },
    };
    return { definition: pb.JobAgentService, implementation: impl as unknown as grpc.UntypedServiceImplementation };
  }

  /** After the replay at start: every running job's pod has the grace to take again. */
  resume(): void {
    for (const job of this.deps.jobs.records()) if (job.phase === "Running") this.watchLost(job.spec.runnerGroup, job.pod);
  }

  /** A job changed: a pod told to stop a job deleted while it runs; free pods given work; an ended job's log closed. */
  onJobChange(job: JobRecord): void {
    if (this.stopped) return;
    if (job.phase === "Running" && job.cancelRequestedBy !== undefined) this.sendCancel(job);
    if (isEnded(job)) {
      Promise.all([jobLogId(job.name), ...JOB_STREAMS.map((st) => jobStreamLogId(job.name, st))].map((id) => this.deps.logs.end(id))).catch((err: unknown) => this.deps.logger.warn({ job: job.name, err: errorMessage(err) }, "could not end a job's log"));
    }
    if (job.phase !== "Running") void this.dispatch(job.spec.runnerGroup);
  }

  stop(): void {
    this.stopped = true;
    for (const timer of this.lost.values()) clearTimeout(timer);
    this.lost.clear();
    for (const taker of this.takers.values()) taker.call.end();
    this.takers.clear();
  }

  private async take(call: TakeCall): Promise<void> {
    const { group, pod, token } = call.request;
    try {
      await this.verify(token, group, pod);
    } catch (err) {
      call.emit("error", toServiceError(err));
      return;
    }
    if (this.stopped) return void call.end();
    const k = key(group, pod);
    const previous = this.takers.get(k);
    const taker: Taker = { group, pod, call, cancelled: new Set() };
    this.takers.set(k, taker);
    previous?.call.end();
    clearTimeout(this.lost.get(k));
    this.lost.delete(k);
    const gone = () => {
      if (this.takers.get(k) !== taker) return;
      this.takers.delete(k);
      this.watchLost(group, pod);
    };
    call.on("cancelled", gone);
    call.on("close", gone);
    call.on("error", gone);
    // Headers at once: the pod knows it was heard, though no job may come for a while.
    call.sendMetadata(new grpc.Metadata());
    this.deps.logger.info({ group, pod }, "pod taking jobs");
    // A job deleted while this pod was away is cancelled now.
    const running = this.runningOn(group, pod);
    if (running?.cancelRequestedBy !== undefined) this.sendCancel(running);
    await this.dispatch(group);
  }

  private sendCancel(job: JobRecord): void {
    const taker = this.takers.get(key(job.spec.runnerGroup, job.pod));
    if (!taker || taker.cancelled.has(job.name)) return;
    taker.cancelled.add(job.name);
    write(taker, pb.JobAssignment.fromPartial({ cancel: { name: job.name, reason: `deleted by ${job.cancelRequestedBy}` } }));
  }

  /** Gives each free pod of the group the next job of its queue. */
  private async dispatch(group: string): Promise<void> {
    if (this.stopped) return;
    await this.lock.run([group], async () => {
      for (const taker of [...this.takers.values()].filter((t) => t.group === group)) {
        if (this.stopped || this.takers.get(key(group, taker.pod)) !== taker || this.runningOn(group, taker.pod)) continue;
        const job = nextJob(this.deps.jobs.queued(group), lastServed(this.deps.jobs.records(), group));
        if (!job) return;
        try {
          await this.deps.jobs.run({ kind: "assign", name: job.name, pod: taker.pod }, { source: "sandbox", command: `assign:${taker.pod}` });
        } catch (err) {
          this.deps.logger.warn({ job: job.name, pod: taker.pod, err: errorMessage(err) }, "could not assign a job");
          continue;
        }
        this.deps.logger.info({ job: job.name, group, pod: taker.pod }, "job assigned");
        // The pod may have gone while the assignment was written: then it has the grace to come back.
        if (this.takers.get(key(group, taker.pod)) !== taker || !write(taker, pb.JobAssignment.fromPartial({ job: this.assignment(job) }))) {
          this.watchLost(group, taker.pod);
        }
      }
    });
  }

  private assignment(job: JobRecord): pb.AssignedJob {
    const timeoutMs = parseDuration(this.deps.groupTimeout(job.spec.runnerGroup) || DEFAULT_JOB_TIMEOUT) ?? 30 * 60_000;
    const env: Record<string, string> = { EPHEMERA_JOB_NAME: job.name };
    if (job.routingKey) Object.assign(env, { SIGNADOT_ROUTING_KEY: job.routingKey, EPHEMERA_ROUTING_KEY: job.routingKey });
    return pb.AssignedJob.fromPartial({
      name: job.name, script: job.spec.script, command: job.spec.command, env, timeoutMs, uploadArtifact: job.spec.uploadArtifact,
    });
  }

  /** The chunks of one or more jobs' output, each checked to be from the pod running the job, appended in order. */
  private async output(call: grpc.ServerReadableStream<pb.JobOutputChunk, pb.JobOutputAck>): Promise<void> {
    let checked: string | undefined;
    for await (const chunk of call as AsyncIterable<pb.JobOutputChunk>) {
      if (checked !== `${chunk.job}\n${chunk.token}`) {
        await this.runningJob(chunk.job, chunk.token);
        checked = `${chunk.job}\n${chunk.token}`;
      }
      if (!chunk.data.length) continue;
      await this.deps.logs.append(jobLogId(chunk.job), chunk.data);
      await this.deps.logs.append(jobStreamLogId(chunk.job, chunk.stream), chunk.data);
    }
  }

  private async finish(req: pb.FinishJobRequest): Promise<void> {
    const job = this.deps.jobs.record(req.job);
    const { pod } = await this.verify(req.token, job.spec.runnerGroup);
    const exitCode = req.exitCode ?? 0;
    const timeout = this.deps.groupTimeout(job.spec.runnerGroup) || DEFAULT_JOB_TIMEOUT;
    const [outcome, message]: [JobOutcome, string] =
      req.reason === "exited" && exitCode === 0 ? ["succeeded", req.message]
      : req.reason === "exited" ? ["failed", req.message || `exited with ${exitCode}`]
      : req.reason === "timeout" ? ["failed", `ran past the group's jobTimeout (${timeout})${req.message ? `: ${req.message}` : ""}`]
      : req.reason === "cancelled" ? ["cancelled", req.message]
      : ["failed", req.message || "the job could not run"];
    const reason = ["exited", "timeout", "cancelled"].includes(req.reason) ? req.reason : "error";
    // A repeated Finish of an ended job is answered as done by the decider (the pod retries).
    await this.deps.jobs.run({ kind: "finish", name: job.name, pod, outcome, exitCode, reason, message }, { source: "sandbox", command: `finish:${pod}` });
  }

  /** The job named, running on the pod the token names. */
  private async runningJob(name: string, token: string): Promise<JobRecord> {
    const job = this.deps.jobs.record(name);
    const { pod } = await this.verify(token, job.spec.runnerGroup);
    if (job.phase !== "Running" || job.pod !== pod) throw new PermissionDeniedError(`job ${name} is not running on pod ${pod}`);
    return job;
  }

  private async verify(token: string, group: string, pod?: string): Promise<{ pod: string }> {
    const claims = await verifyPodCapability(this.deps.keys, token, group);
    if (pod !== undefined && claims.pod !== pod) throw new PermissionDeniedError(`group ${group}: the pod token is for pod ${claims.pod}, not ${pod}`);
    return claims;
  }

  private runningOn(group: string, pod: string): JobRecord | undefined {
    for (const job of this.deps.jobs.records()) if (job.phase === "Running" && job.pod === pod && job.spec.runnerGroup === group) return job;
    return undefined;
  }

  /** A pod gone while running a job: the job fails unless the pod takes again within the grace. */
  private watchLost(group: string, pod: string): void {
    const k = key(group, pod);
    if (this.stopped || this.lost.has(k) || !this.runningOn(group, pod)) return;
    const grace = this.deps.podLostGraceMs ?? POD_LOST_GRACE_MS;
    this.lost.set(k, setTimeout(() => {
      this.lost.delete(k);
      if (this.stopped || this.takers.has(k)) return;
      const job = this.runningOn(group, pod);
      if (!job) return;
      const message = `pod ${pod} lost: it stopped taking jobs while running this one and did not take again within ${grace / 1000}s`;
      this.deps.jobs.run({ kind: "expire", name: job.name, outcome: "failed", reason: "pod-lost", message }, { source: "sandbox", command: "pod-lost" })
        .catch((err: unknown) => this.deps.logger.warn({ job: job.name, err: errorMessage(err) }, "could not fail a job of a lost pod"));
    }, grace).unref());
  }
}

const key = (group: string, pod: string) => `${group}/${pod}`;

/** Writes to a Take stream; false when the stream is already gone. */
function write(taker: Taker, message: pb.JobAssignment): boolean {
  if (taker.call.cancelled || taker.call.destroyed || taker.call.writableEnded) return false;
  try {
    taker.call.write(message);
    return true;
  } catch {
    return false;
  }
}

/** When each submitter was last served in the group: the stream position of their last assignment. */
function lastServed(jobs: Iterable<JobRecord>, group: string): Map<string, number> {
  const served = new Map<string, number>();
  for (const job of jobs) {
    if (job.spec.runnerGroup !== group || job.assignedPosition === undefined) continue;
    served.set(job.submitter, Math.max(served.get(job.submitter) ?? 0, job.assignedPosition));
  }
  return served;
}
