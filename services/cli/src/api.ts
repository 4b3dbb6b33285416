// The public API as the command line sees it: its gRPC clients on one channel, every
// unary call bound by a deadline and every stream cancellable and bounded.
import { call, channelCredentials, clientOptions, fromServiceError, grpc, type ClientTls } from "@ephemera/kit/client";
import * as pb from "@ephemera/proto";

/** A sandbox create's call: the API's default admission wait (60 s) and a margin. */
const ADMISSION_CALL_MS = 75_000;

/** How a server stream ended: the server closed it, the consumer had enough, or it was aborted. */
export type StreamEnd = "end" | "stopped" | "aborted";

export interface StreamOptions {
  /** Absolute time (ms since epoch) after which the call is abandoned with DEADLINE_EXCEEDED. */
  deadline?: number;
  signal?: AbortSignal;
}

export interface ApiOptions {
  /** Deadline of each unary call. */
  timeoutMs?: number;
  /** Who is asking: recorded by an open API on the events a call causes (x-ephemera-actor). */
  actor?: string;
  /** Sent as `authorization: Bearer <token>` with every call, streams included. */
  token?: string;
  /** TLS to the API; absent: plaintext. */
  tls?: ClientTls;
}

export class Api {

  /** Every client of the API, on one channel. */
  private readonly clients: pb.ApiClients;
  private readonly timeoutMs: number;
  private readonly actor: string;
  private readonly token: string | undefined;

  constructor(readonly address: string, options: ApiOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? 15_000;
    this.actor = options.actor ?? process.env["EPHEMERA_ACTOR"] ?? process.env["USER"] ?? "";
    this.token = options.token;
    const { credentials, options: tlsOptions } = channelCredentials(options.tls);
    this.clients = pb.apiClients(address, credentials, { ...clientOptions, ...tlsOptions });
  }

  applyPlugin(plugin: pb.ResourcePlugin, dryRun = false): Promise<pb.ApplyResourcePluginResponse> {
    return call(this.clients.plugins.apply.bind(this.clients.plugins), { plugin, dryRun }, this.timeoutMs, this.who());
  }

  getPlugin(ref: string): Promise<pb.ResourcePluginVersion> {
    return call(this.clients.plugins.get.bind(this.clients.plugins), { ref }, this.timeoutMs, this.metadata());
  }

  /** Every version's summary (no spec), fetched a page at a time. */
  async listPlugins(name = ""): Promise<pb.ResourcePluginVersion[]> {
    const out: pb.ResourcePluginVersion[] = [];
    let pageToken = "";
    do {
      const page = await call(this.clients.plugins.list.bind(this.clients.plugins), { pageSize: 500, pageToken, name }, this.timeoutMs, this.metadata());
      out.push(...page.plugins);
      pageToken = page.nextPageToken;
    } while (pageToken);
    return out;
  }


  async deletePlugin(ref: string): Promise<string[]> {
    return (await call(this.clients.plugins.delete.bind(this.clients.plugins), { ref }, this.timeoutMs, this.who())).deleted;
  }

  /** A create may be held by the API under a burst (up to its EPHEMERA_ADMISSION_TIMEOUT, 60 s by default): its call waits longer. */
  applySandbox(sandbox: pb.Sandbox, dryRun = false): Promise<pb.ApplySandboxResponse> {
    const timeoutMs = dryRun ? this.timeoutMs : Math.max(this.timeoutMs, ADMISSION_CALL_MS);
    return call(this.clients.sandboxes.apply.bind(this.clients.sandboxes), { sandbox, dryRun }, timeoutMs, this.who());
  }

  getSandbox(name: string, showOutputs = false): Promise<pb.SandboxView> {
    return call(this.clients.sandboxes.get.bind(this.clients.sandboxes), { name, showOutputs }, this.timeoutMs, this.metadata());
  }

  async listSandboxes(): Promise<pb.SandboxView[]> {
    return (await call(this.clients.sandboxes.list.bind(this.clients.sandboxes), {}, this.timeoutMs, this.metadata())).sandboxes;
  }

  deleteSandbox(name: string, force: boolean): Promise<pb.SandboxView> {
    return call(this.clients.sandboxes.delete.bind(this.clients.sandboxes), { name, force }, this.timeoutMs, this.who());
  }

  retrySandbox(name: string): Promise<pb.RetrySandboxResponse> {
    return call(this.clients.sandboxes.retry.bind(this.clients.sandboxes), { name }, this.timeoutMs, this.who());
  }

  applyRouteGroup(routeGroup: pb.RouteGroup, dryRun = false): Promise<pb.ApplyRouteGroupResponse> {
    return call(this.clients.routeGroups.apply.bind(this.clients.routeGroups), { routeGroup, dryRun }, this.timeoutMs, this.who());
  }

  getRouteGroup(name: string): Promise<pb.RouteGroupView> {
    return call(this.clients.routeGroups.get.bind(this.clients.routeGroups), { name }, this.timeoutMs, this.metadata());
  }

  async listRouteGroups(): Promise<pb.RouteGroupView[]> {
    return (await call(this.clients.routeGroups.list.bind(this.clients.routeGroups), {}, this.timeoutMs, this.metadata())).routeGroups;
  }

  deleteRouteGroup(name: string): Promise<pb.RouteGroupView> {
    return call(this.clients.routeGroups.delete.bind(this.clients.routeGroups), { name }, this.timeoutMs, this.who());
  }

  applyJobRunnerGroup(jobRunnerGroup: pb.JobRunnerGroup, dryRun = false): Promise<pb.ApplyJobRunnerGroupResponse> {
    return call(this.clients.jobRunnerGroups.apply.bind(this.clients.jobRunnerGroups), { jobRunnerGroup, dryRun }, this.timeoutMs, this.who());
  }

  getJobRunnerGroup(name: string): Promise<pb.JobRunnerGroupView> {
    return call(this.clients.jobRunnerGroups.get.bind(this.clients.jobRunnerGroups), { name }, this.timeoutMs, this.metadata());
  }

  async listJobRunnerGroups(): Promise<pb.JobRunnerGroupView[]> {
    return (await call(this.clients.jobRunnerGroups.list.bind(this.clients.jobRunnerGroups), {}, this.timeoutMs, this.metadata())).jobRunnerGroups;
  }

  deleteJobRunnerGroup(name: string): Promise<pb.JobRunnerGroupView> {
    return call(this.clients.jobRunnerGroups.delete.bind(this.clients.jobRunnerGroups), { name }, this.timeoutMs, this.who());
  }

  submitJob(job: pb.Job): Promise<pb.JobView> {
    return call(this.clients.jobs.submit.bind(this.clients.jobs), { job }, this.timeoutMs, this.who());
  }

  getJob(name: string): Promise<pb.JobView> {
    return call(this.clients.jobs.get.bind(this.clients.jobs), { name }, this.timeoutMs, this.metadata());
  }

  async listJobs(all: boolean): Promise<pb.JobView[]> {
    return (await call(this.clients.jobs.list.bind(this.clients.jobs), { all }, this.timeoutMs, this.metadata())).jobs;
  }

  deleteJob(name: string): Promise<pb.JobView> {
    return call(this.clients.jobs.delete.bind(this.clients.jobs), { name }, this.timeoutMs, this.who());
  }

  /** Every call's metadata: the bearer token, if any. */
  private metadata(): grpc.Metadata {
    const m = new grpc.Metadata();
    if (this.token) m.set("authorization", `Bearer ${this.token}`);
    return m;
  }

  /** A write's metadata: the token, and who is asking. */
  private who(): grpc.Metadata {
    const m = this.metadata();
    if (this.actor) m.set("x-ephemera-actor", this.actor);
    return m;
  }

  /** Streams the sandbox's views; `onView` returns true once it has seen enough. */
  watchSandbox(name: string, onView: (view: pb.SandboxView) => boolean | void, opts: StreamOptions): Promise<StreamEnd> {
    const stream = this.clients.sandboxes.watch({ name, showOutputs: false }, this.metadata(), callOptions(opts));
    return consume(stream, onView, opts.signal);
  }

  /** A job's artifact (a path of its uploadArtifact, `@stdout` or `@stderr`), chunk by chunk. */
  downloadArtifact(job: string, path: string, onChunk: (chunk: pb.ArtifactData) => void, opts: StreamOptions): Promise<StreamEnd> {
    return consume(this.clients.artifacts.download({ job, path }, this.metadata(), callOptions(opts)), onChunk, opts.signal);
  }

  streamLogs(request: pb.GetLogsRequest, onChunk: (chunk: pb.LogChunk) => void, opts: StreamOptions): Promise<StreamEnd> {
    return consume(this.clients.logs.get(request, this.metadata(), callOptions(opts)), onChunk, opts.signal);
  }

  /** A job's output, stream by stream; with `follow`, until the job has ended. */
  streamJobLogs(request: pb.GetJobLogsRequest, onChunk: (chunk: pb.JobLogChunk) => void, opts: StreamOptions): Promise<StreamEnd> {
    return consume(this.clients.jobs.logs(request, this.metadata(), callOptions(opts)), onChunk, opts.signal);
  }

  watchEvents(request: Partial<pb.WatchEventsRequest>, onRecord: (record: pb.EventRecord) => void, opts: StreamOptions): Promise<StreamEnd> {
    // Completed with defaults: a caller in plain JavaScript may leave the later fields (after_position, since_ms) out.
    return consume(this.clients.events.watch(pb.WatchEventsRequest.fromPartial(request), this.metadata(), callOptions(opts)), onRecord, opts.signal);
  }

  close(): void {
    for (const client of Object.values(this.clients)) client.close();
  }
}

function callOptions(opts: StreamOptions): Partial<grpc.CallOptions> {
  return opts.deadline === undefined ? {} : { deadline: opts.deadline };
}

/** Reads a server stream to its end; failures come back as the named errors of @ephemera/kit. */
export function consume<T>(
  stream: grpc.ClientReadableStream<T>,
  onItem: (item: T) => boolean | void,
  signal?: AbortSignal,
): Promise<StreamEnd> {
  return new Promise((resolve, reject) => {
    let ending: StreamEnd | undefined;
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener("abort", onAbort);
      fn();
    };
    const stop = (why: StreamEnd) => {
      ending ??= why;
      stream.cancel();
    };
    const onAbort = () => stop("aborted");
    if (signal?.aborted) onAbort();
    else signal?.addEventListener("abort", onAbort, { once: true });
    stream.on("data", (item: T) => {
      if (ending !== undefined) return;
      try {
        if (onItem(item) === true) stop("stopped");
      } catch (err) {
        ending = "stopped";
        stream.cancel();
        settle(() => reject(err));
      }
    });
    stream.on("end", () => settle(() => resolve(ending ?? "end")));
    stream.on("error", (err: grpc.ServiceError) => {
      if (ending !== undefined && err.code === grpc.status.CANCELLED) settle(() => resolve(ending!));
      else settle(() => reject(fromServiceError(err)));
    });
  });
}
