// The public API as the console sees it: its gRPC clients on one channel, every call made
// with the browser's own token (so the API's roles decide), unary calls bound by a
// deadline, streams cancelled when the browser goes away. Failures keep their gRPC status.
import { channelCredentials, clientOptions, grpc, type ClientTls } from "@ephemera/kit/client";
import * as pb from "@ephemera/proto";
import { ApiCallError } from "./errors.js";

export interface ConsoleApiOptions {
  /** Deadline of each unary call; default 15 s. */
  timeoutMs?: number;
  /** TLS to the API; absent: plaintext. */
  tls?: ClientTls;
}

/** An upstream stream, open until it ends, fails or is cancelled. */
export interface Upstream {
  cancel(): void;
  /** Settles when the stream has ended: "end" (the API closed it) or "cancelled"; rejects with an ApiCallError. */
  done: Promise<"end" | "cancelled">;
}

type Unary<Req, Res> = (
  request: Req, metadata: grpc.Metadata, options: Partial<grpc.CallOptions>, callback: (err: grpc.ServiceError | null, res: Res) => void,
) => grpc.ClientUnaryCall;

/** The API's refusal as it said it; a transport failure says which API could not be reached. */
function apiError(address: string, err: grpc.ServiceError): ApiCallError {
  // grpc-js ends a connection failure with an empty "Resolution note:": not a word for a page.
  const details = (err.details || err.message).replace(/\s*Resolution note:\s*$/, "");
  const unreachable = err.code === grpc.status.UNAVAILABLE || err.code === grpc.status.DEADLINE_EXCEEDED;
  return new ApiCallError(err.code, unreachable ? `the API at ${address} cannot be reached now: ${details}` : details, { cause: err });
}

export class ConsoleApi {
  /** Every client of the API, on one channel. */
  private readonly clients: pb.ApiClients;
  private readonly timeoutMs: number;

  constructor(readonly address: string, options: ConsoleApiOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? 15_000;
    const { credentials, options: tlsOptions } = channelCredentials(options.tls);
    this.clients = pb.apiClients(address, credentials, { ...clientOptions, ...tlsOptions });
  }

  whoAmI(token: string | undefined): Promise<pb.WhoAmIResponse> {
    return this.unary(this.clients.access.whoAmI.bind(this.clients.access), {}, token);
  }

  /** Every version's summary (no spec), all pages. */
  async listPlugins(token: string | undefined): Promise<pb.ResourcePluginVersion[]> {
    const out: pb.ResourcePluginVersion[] = [];
    let pageToken = "";
    do {
      const page = await this.unary(this.clients.plugins.list.bind(this.clients.plugins), { pageSize: 500, pageToken, name: "" }, token);
      out.push(...page.plugins);
      pageToken = page.nextPageToken;
    } while (pageToken);
    return out;
  }

  getPlugin(token: string | undefined, ref: string): Promise<pb.ResourcePluginVersion> {
    return this.unary(this.clients.plugins.get.bind(this.clients.plugins), { ref }, token);
  }

  async listSandboxes(token: string | undefined): Promise<pb.SandboxView[]> {
    return (await this.unary(this.clients.sandboxes.list.bind(this.clients.sandboxes), {}, token)).sandboxes;
  }

  getSandbox(token: string | undefined, name: string, showOutputs = false): Promise<pb.SandboxView> {
    return this.unary(this.clients.sandboxes.get.bind(this.clients.sandboxes), { name, showOutputs }, token);
  }

  deleteSandbox(token: string | undefined, name: string): Promise<pb.SandboxView> {
    return this.unary(this.clients.sandboxes.delete.bind(this.clients.sandboxes), { name, force: false }, token, WRITER);
  }

  retrySandbox(token: string | undefined, name: string): Promise<pb.RetrySandboxResponse> {
    return this.unary(this.clients.sandboxes.retry.bind(this.clients.sandboxes), { name }, token, WRITER);
  }

  listRouteGroups(token: string | undefined): Promise<pb.ListRouteGroupsResponse> {
    return this.unary(this.clients.routeGroups.list.bind(this.clients.routeGroups), {}, token);
  }

  getRouteGroup(token: string | undefined, name: string): Promise<pb.RouteGroupView> {
    return this.unary(this.clients.routeGroups.get.bind(this.clients.routeGroups), { name }, token);
  }

  listJobs(token: string | undefined, all: boolean): Promise<pb.ListJobsResponse> {
    return this.unary(this.clients.jobs.list.bind(this.clients.jobs), { all }, token);
  }

  getJob(token: string | undefined, name: string): Promise<pb.JobView> {
    return this.unary(this.clients.jobs.get.bind(this.clients.jobs), { name }, token);
  }

  listJobRunnerGroups(token: string | undefined): Promise<pb.ListJobRunnerGroupsResponse> {
    return this.unary(this.clients.jobRunnerGroups.list.bind(this.clients.jobRunnerGroups), {}, token);
  }

  /** The sandbox's views, at once and after every change, until it is gone or the watch is cancelled. */
  watchSandbox(token: string | undefined, name: string, onView: (view: pb.SandboxView) => void): Upstream {
    return this.stream(this.clients.sandboxes.watch({ name, showOutputs: false }, metadata(token)), onView);
  }

  streamLogs(token: string | undefined, request: pb.GetLogsRequest, onChunk: (chunk: pb.LogChunk) => void): Upstream {
    return this.stream(this.clients.logs.get(request, metadata(token)), onChunk);
  }

  watchEvents(token: string | undefined, request: pb.WatchEventsRequest, onRecord: (record: pb.EventRecord) => void): Upstream {
    return this.stream(this.clients.events.watch(request, metadata(token)), onRecord);
  }

  close(): void {
    for (const client of Object.values(this.clients)) client.close();
  }

  private unary<Req, Res>(method: Unary<Req, Res>, request: Req, token: string | undefined, actor?: string): Promise<Res> {
    return new Promise((resolve, reject) => {
      method(request, metadata(token, actor), { deadline: Date.now() + this.timeoutMs }, (err, res) => (err ? reject(apiError(this.address, err)) : resolve(res)));
    });
  }

  private stream<T>(call: grpc.ClientReadableStream<T>, onItem: (item: T) => void): Upstream {
    let cancelled = false;
    const done = new Promise<"end" | "cancelled">((resolve, reject) => {
      call.on("data", (item: T) => { if (!cancelled) onItem(item); });
      call.on("end", () => resolve(cancelled ? "cancelled" : "end"));
      call.on("error", (err: grpc.ServiceError) => (cancelled && err.code === grpc.status.CANCELLED ? resolve("cancelled") : reject(apiError(this.address, err))));
    });
    return { done, cancel: () => { if (!cancelled) { cancelled = true; call.cancel(); } } };
  }
}

/** Who an open API records as the actor of the console's writes (an API with tokens records the token's name). */
const WRITER = "console";

/** The call's metadata: the browser's token as `authorization: Bearer`, when it sent one. */
function metadata(token: string | undefined, actor?: string): grpc.Metadata {
  const m = new grpc.Metadata();
  if (token) m.set("authorization", `Bearer ${token}`);
  if (actor) m.set("x-ephemera-actor", actor);
  return m;
}
