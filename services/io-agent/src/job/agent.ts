// The job agent: the main container's program in a job runner group's pod. It offers the pod
// to its group (JobAgent.Take, with the pod's token), runs each job it is given (one at a
// time) in the container's environment plus the job's, streams the output (Output), kills
// the job at its timeout or when told to cancel it, uploads its artifacts (PutArtifact) and
// says how it ended (Finish). When the service goes away, Take is tried again with
// exponential backoff; a running job goes on meanwhile.
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { resolve as resolvePath } from "node:path";
import { ExponentialBackoff, type IBackoff } from "cockatiel";
import { call, channelCredentials, delay, errorMessage, fromServiceError, type grpc } from "@ephemera/kit";
import * as pb from "@ephemera/proto";
import { withRetries } from "../retry.js";
import { AGENT_ONLY_ENV, type JobAgentConfig } from "./config.js";
import { OUTPUT_CHUNK_BYTES, StartError, startJob, type OutputSink, type RunningJob } from "./process.js";

export type Say = (line: string) => void;
type Reason = "exited" | "timeout" | "cancelled" | "error";

export interface JobAgentOptions {
  /** The environment jobs start from (the container's); the agent's own variables are removed from it. */
  env?: NodeJS.ProcessEnv;
  /** Where jobs run and relative artifact paths resolve: the container's working directory. */
  cwd?: string;
  say?: Say;
}

interface Current {
  name: string;
  process?: RunningJob;
  /** Why it is being stopped, once it is. */
  stopped?: Exclude<Reason, "exited" | "error"> | "stopping";
}

export class JobAgent {
  private readonly client: pb.JobAgentClient;
  private readonly env: NodeJS.ProcessEnv;
  private readonly say: Say;
  private readonly stopping = new AbortController();
  private take?: grpc.ClientReadableStream<pb.JobAssignment>;
  private current?: Current;
  private running?: Promise<void>;

  constructor(private readonly config: JobAgentConfig, private readonly options: JobAgentOptions = {}) {
    const { credentials, options: channel } = channelCredentials(config.tls);
    this.client = new pb.JobAgentClient(config.jobs, credentials, channel);
    const env = { ...(options.env ?? process.env) };
    for (const name of AGENT_ONLY_ENV) delete env[name];
    this.env = env;
    this.say = options.say ?? (() => undefined);
  }

  /** Takes jobs until stop(); resolves then, once the running job (if any) has ended and been reported. */
  async run(): Promise<void> {
    const policy = new ExponentialBackoff({ initialDelay: this.config.reconnect.initialDelayMs, maxDelay: this.config.reconnect.maxDelayMs });
    let backoff: IBackoff<void> | undefined;
    while (!this.stopping.signal.aborted) {
      const { error, heard } = await this.takeOnce();
      if (this.stopping.signal.aborted) break;
      // A stream that was answered starts the backoff over.
      if (heard) backoff = undefined;
      backoff = backoff ? backoff.next() : policy.next();
      this.say(`jobs service at ${this.config.jobs} ${error ? `unreachable (${error})` : "ended the stream"}; taking again in ${Math.round(backoff.duration)} ms`);
      await delay(backoff.duration, this.stopping.signal);
    }
    await this.running;
    this.client.close();
  }

  /** Stops taking jobs; a running job is killed (SIGTERM, then SIGKILL) and reported as ended by an error. */
  stop(): void {
    this.stopping.abort();
    this.take?.cancel();
    if (this.current?.process && !this.current.stopped) {
      this.current.stopped = "stopping";
      this.current.process.stop(this.config.killGraceMs);
    }
  }

  /** One Take stream, until it ends or fails: what failed, and whether the service answered at all. */
  private takeOnce(): Promise<{ error?: string; heard: boolean }> {
    const { group, pod, token } = this.config;
    const stream = this.client.take({ group, pod, token });
    this.take = stream;
    let heard = false;
    return new Promise((resolve) => {
      stream.on("metadata", () => { heard = true; });
      stream.on("data", (a: pb.JobAssignment) => { heard = true; this.assigned(a); });
      stream.on("error", (err: grpc.ServiceError) => resolve({ error: errorMessage(fromServiceError(err)), heard }));
      stream.on("end", () => resolve({ heard }));
    });
  }

  private assigned(a: pb.JobAssignment): void {
    if (a.cancel) {
      const c = this.current;
      if (c?.name !== a.cancel.name || c.stopped) return;
      this.say(`job ${c.name}: cancelled${a.cancel.reason ? ` (${a.cancel.reason})` : ""}; stopping it`);
      c.stopped = "cancelled";
      c.process?.stop(this.config.killGraceMs);
      return;
    }
    const job = a.job;
    if (!job) return;
    if (this.current) {
      // One job at a time: the service sends the next only after Finish.
      void this.finish(job.name, "error", undefined, `pod ${this.config.pod} is running job ${this.current.name}; one job at a time`);
      return;
    }
    const current: Current = { name: job.name };
    this.current = current;
    this.running = this.runJob(job, current).catch((err: unknown) => this.say(`job ${job.name}: ${errorMessage(err)}`)).finally(() => {
      if (this.current === current) this.current = undefined;
    });
  }

  private async runJob(job: pb.AssignedJob, current: Current): Promise<void> {
    this.say(`job ${job.name}: starting`);
    const output = this.openOutput(job.name);
    let timer: NodeJS.Timeout | undefined;
    let code: number | undefined;
    let reason: Reason;
    let message = "";
    try {
      current.process = await startJob({ script: job.script, command: job.command, env: job.env }, this.env, output.sink, this.cwd);
      if (current.stopped) current.process.stop(this.config.killGraceMs);
      if (job.timeoutMs > 0) {
        timer = setTimeout(() => {
          if (current.stopped) return;
          current.stopped = "timeout";
          this.say(`job ${job.name}: past its timeout of ${job.timeoutMs} ms; stopping it`);
          current.process?.stop(this.config.killGraceMs);
        }, job.timeoutMs);
      }
      const exited = await current.process.exited;
      code = exited.code;
      reason = current.stopped === "stopping" ? "error" : current.stopped ?? "exited";
      if (current.stopped === "timeout") message = `killed after its timeout of ${job.timeoutMs} ms`;
      if (current.stopped === "stopping") message = `pod ${this.config.pod} is stopping`;
    } catch (err) {
      if (!(err instanceof StartError)) throw err;
      reason = "error";
      message = err.message;
    } finally {
      clearTimeout(timer);
    }
    const lost = await output.end();
    const problems = [message, lost ? `output lost: ${lost}` : "", ...(await this.uploadArtifacts(job))].filter(Boolean);
    await this.finish(job.name, reason, code, problems.join("; "));
    this.say(`job ${job.name}: ${reason}${code === undefined ? "" : ` (exit code ${code})`}`);
  }

  private get cwd(): string {
    return this.options.cwd ?? process.cwd();
  }

  /** The job's Output stream: chunks written in order; `end` closes it and says what went wrong, if anything. */
  private openOutput(job: string): { sink: OutputSink; end: () => Promise<string | undefined> } {
    let failure: string | undefined;
    let stream!: grpc.ClientWritableStream<pb.JobOutputChunk>;
    const acked = new Promise<void>((resolve) => {
      stream = this.client.output((err) => {
        if (err) failure = errorMessage(fromServiceError(err));
        resolve();
      });
    });
    stream.on("error", () => undefined);
    const token = this.config.token;
    return {
      sink: {
        write: (name, data) => (failure ? true : stream.write(pb.JobOutputChunk.fromPartial({ job, token, stream: name, data }))),
        drained: () => new Promise<void>((resolve) => {
          if (failure) return resolve();
          const done = () => { stream.off("drain", done); resolve(); };
          stream.on("drain", done);
          void acked.then(done);
        }),
      },
      end: async () => {
        if (!failure) stream.end();
        await acked;
        return failure;
      },
    };
  }

  /** Each declared artifact uploaded; what could not be, one line each (a missing file ends no job). */
  private async uploadArtifacts(job: pb.AssignedJob): Promise<string[]> {
    const problems: string[] = [];
    for (const { path } of job.uploadArtifact) {
      try {
        const sent = await this.putArtifact(job.name, path);
        this.say(`job ${job.name}: artifact ${path} uploaded (${sent.size} bytes)`);
      } catch (err) {
        problems.push(`artifact ${path}: ${errorMessage(err)}`);
      }
    }
    return problems;
  }

  private async putArtifact(job: string, path: string): Promise<pb.PutArtifactResponse> {
    const file = resolvePath(this.cwd, path);
    let info;
    try {
      info = await stat(file);
    } catch (err) {
      throw new Error((err as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : errorMessage(err), { cause: err });
    }
    if (!info.isFile()) throw new Error("not a regular file");
    const token = this.config.token;
    return new Promise<pb.PutArtifactResponse>((resolve, reject) => {
      const upload = this.client.putArtifact((err, res) => (err ? reject(fromServiceError(err)) : resolve(res)));
      upload.on("error", () => undefined);
      const read = createReadStream(file, { highWaterMark: OUTPUT_CHUNK_BYTES });
      let pending: Buffer | undefined;
      read.on("data", (data) => {
        // Each chunk is sent once the next is read, so the last one carries `last`.
        if (pending && !upload.write(pb.ArtifactChunk.fromPartial({ job, token, path, data: pending }))) {
          read.pause();
          upload.once("drain", () => read.resume());
        }
        pending = data as Buffer;
      });
      read.on("error", (err) => { upload.cancel(); reject(err); });
      read.on("end", () => {
        upload.write(pb.ArtifactChunk.fromPartial({ job, token, path, data: pending ?? Buffer.alloc(0), last: true }));
        upload.end();
      });
    });
  }

  /** Finish, retried while the service is unavailable (it is idempotent). */
  private async finish(job: string, reason: Reason, exitCode: number | undefined, message: string): Promise<void> {
    const request = pb.FinishJobRequest.fromPartial({ job, token: this.config.token, reason, message, ...(exitCode === undefined ? {} : { exitCode }) });
    await withRetries(
      (timeoutMs) => call(this.client.finish.bind(this.client), request, Math.min(timeoutMs, 15_000)),
      { totalMs: this.config.retryMs, baseDelayMs: 250, maxDelayMs: 5000 },
      (n) => this.say(`job ${job}: finish not recorded (${n.error}); trying again in ${n.delayMs} ms`),
    );
  }
}
