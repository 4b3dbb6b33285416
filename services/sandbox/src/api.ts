// The public gRPC API: thin handlers over SandboxCore.
import * as pb from "@ephemera/proto";
import { Aggregates } from "@ephemera/events";
import { toServiceError, unary, type grpc, type Logger, type ServiceBinding } from "@ephemera/kit";
import type { ApiAccess } from "./auth/access.js";
import { guard, principalOf } from "./auth/guard.js";
import { jobLogs } from "./job/logs.js";
import type { JobRecord } from "./job/state.js";
import { serveLocals } from "./locals/serve.js";
import { logService } from "./logs/api.js";
import { watchEvents } from "./events/watch.js";
import { downloadArtifact } from "./job/artifacts.js";
import type { CallContext, SandboxCore } from "./service.js";

/**
 * The caller's identity, recorded as the actor of what the call writes: the verified token's
 * name when the API asks for tokens; else the `x-ephemera-actor` metadata a client sends, as it says.
 */
function caller(call: { metadata: grpc.Metadata }): CallContext {
  const verified = principalOf(call);
  if (verified) return { actor: verified.name };
  const actor = call.metadata.get("x-ephemera-actor")[0];
  return typeof actor === "string" && actor ? { actor: actor.slice(0, 128) } : {};
}

/** A call that may be held (an admitted create): aborted when the caller cancels, and its deadline. */
function waiting(call: grpc.ServerUnaryCall<unknown, unknown>): Pick<CallContext, "signal" | "deadline"> {
  const controller = new AbortController();
  call.once("cancelled", () => controller.abort());
  const d = call.getDeadline();
  const deadline = d instanceof Date ? d.getTime() : d;
  return { signal: controller.signal, ...(Number.isFinite(deadline) ? { deadline } : {}) };
}

/** The API's services; with `access`, every method needs a bearer token whose role allows it (auth/policy.ts). */
export function apiServices(core: SandboxCore, logger: Logger, access?: ApiAccess): ServiceBinding[] {
  const plugins: pb.ResourcePluginServiceServer = {
    apply: unary(async (req: pb.ApplyResourcePluginRequest, call) => core.applyPlugin(req.plugin, caller(call), req.dryRun), logger),
    // Reads first catch up with the store (readYourWrites): a write made through any replica is seen.
    get: unary(async (req: pb.GetResourcePluginRequest) => { await core.readYourWrites(); return core.getPlugin(req.ref); }, logger),
    list: unary(async (req: pb.ListResourcePluginsRequest) => { await core.readYourWrites(); return core.listPlugins(req); }, logger),
    delete: unary(async (req: pb.DeleteResourcePluginRequest, call) => ({ deleted: await core.deletePlugin(req.ref, caller(call)) }), logger),
  };
  const sandboxes: pb.SandboxServiceServer = {
    apply: unary(async (req: pb.ApplySandboxRequest, call) => core.applySandbox(req.sandbox, { ...caller(call), ...waiting(call) }, req.dryRun), logger),
    get: unary(async (req: pb.GetSandboxRequest) => { await core.readYourWrites(); return core.view(req.name, req.showOutputs); }, logger),
    list: unary(async () => { await core.readYourWrites(); return { sandboxes: core.list() }; }, logger),
    delete: unary(async (req: pb.DeleteSandboxRequest, call) => core.deleteSandbox(req.name, req.force, caller(call)), logger),
    retry: unary(async (req: pb.RetrySandboxRequest, call) => core.retrySandbox(req.name, caller(call)), logger),
    watch: (call) => {
      const { name, showOutputs } = call.request;
      let done = false;
      let sending = Promise.resolve();
      const finish = (err?: unknown) => {
        if (done) return;
        done = true;
        unwatch();
        if (err) call.emit("error", toServiceError(err)); else call.end();
      };
      const send = (view: pb.SandboxView | undefined) => {
        sending = sending.then(async () => {
          if (done) return;
          if (!view) return finish();
          // Values are read from the journal only when asked for.
          call.write(showOutputs ? await core.view(name, true).catch(() => view) : view);
        });
      };
      const unwatch = core.watch(name, send);
      call.on("cancelled", () => finish());
      core.readYourWrites().then(() => core.view(name, showOutputs)).then((v) => send(v), (err: unknown) => finish(err));
    },
  };
  const routeGroups: pb.RouteGroupServiceServer = {
    apply: unary(async (req: pb.ApplyRouteGroupRequest, call) =>
      core.routeGroups.apply(req.routeGroup, core.meta(caller(call), "apply"), req.dryRun), logger),
    get: unary(async (req: pb.GetRouteGroupRequest) => core.routeGroups.get(req.name), logger),
    list: unary(async () => ({ routeGroups: core.routeGroups.list() }), logger),
    delete: unary(async (req: pb.DeleteRouteGroupRequest, call) => core.routeGroups.delete(req.name, core.meta(caller(call), "delete")), logger),
  };
  const jobRunnerGroups: pb.JobRunnerGroupServiceServer = {
    apply: unary(async (req: pb.ApplyJobRunnerGroupRequest, call) =>
      core.jobRunnerGroups.apply(req.jobRunnerGroup, core.meta(caller(call), "apply"), req.dryRun), logger),
    get: unary(async (req: pb.GetJobRunnerGroupRequest) => core.jobRunnerGroups.get(req.name), logger),
    list: unary(async () => ({ jobRunnerGroups: core.jobRunnerGroups.list() }), logger),
    delete: unary(async (req: pb.DeleteJobRunnerGroupRequest, call) => core.jobRunnerGroups.delete(req.name, core.meta(caller(call), "delete")), logger),
  };
  // Each job change, for the follows of JobService.Logs (listening from the first follow on: the feed's listeners stay).
  const jobListeners = new Set<(job: JobRecord) => void>();
  let listening = false;
  const onJobChange = (listener: (job: JobRecord) => void) => {
    if (!listening) {
      listening = true;
      core.feed.onCommit((c) => {
        if (c.aggregate !== Aggregates.job || !jobListeners.size) return;
        const state = core.jobStates.get(c.aggregateId)?.state;
        if (state?.status === "job") for (const l of jobListeners) l(state);
      });
    }
    jobListeners.add(listener);
    return () => { jobListeners.delete(listener); };
  };
  const jobs: pb.JobServiceServer = {
    logs: jobLogs({
      record: (name) => core.jobs.record(name), logs: () => core.deps.logs,
      onJobChange,
    }),
    submit: unary(async (req: pb.SubmitJobRequest, call) => {
      const who = caller(call);
      return core.jobs.submit(req.job, who.actor ?? "anonymous", core.meta(who, "submit"));
    }, logger),
    get: unary(async (req: pb.GetJobRequest) => core.jobs.get(req.name), logger),
    list: unary(async (req: pb.ListJobsRequest) => ({ jobs: core.jobs.list(req.all) }), logger),
    delete: unary(async (req: pb.DeleteJobRequest, call) => {
      const who = caller(call);
      return core.jobs.delete(req.name, who.actor ?? "anonymous", core.meta(who, "delete"));
    }, logger),
  };
  const artifacts: pb.ArtifactServiceServer = {
    download: (call) => {
      const { job, path } = call.request;
      Promise.resolve().then(() => downloadArtifact(core.jobs.record(job), path, core.deps.values, core.deps.logs)).then((chunks) => {
        for (const data of chunks) call.write({ data });
        call.end();
      }, (err: unknown) => call.emit("error", toServiceError(err)));
    },
  };
  const locals: pb.LocalServiceServer = {
    serve: unary(async (req: pb.ServeLocalsRequest, call) => {
      const served = serveLocals({
        sandbox: (name) => core.sandboxes.get(name)?.state,
        sandboxes: () => [...core.sandboxes.entries()].map(([, { state }]) => state),
      }, req.sandboxes);
      // Each sandbox's status, for `eph local status`: one view per sandbox served.
      const status = new Map<string, string>();
      for (const name of new Set(served.map((l) => l.sandbox))) {
        status.set(name, await core.view(name, false).then((v) => v.status?.reason ?? "", () => ""));
      }
      return {
        subject: principalOf(call)?.name ?? "anonymous",
        open: !access,
        locals: served.map((l) => ({ ...l, status: status.get(l.sandbox) ?? "" })),
      };
    }, logger),
  };
  const logs = logService(core);
  const events: pb.EventServiceServer = { watch: watchEvents(core) };
  const access_: pb.AccessServiceServer = {
    whoAmI: unary(async (_req: pb.WhoAmIRequest, call) => {
      const verified = principalOf(call);
      if (verified) return { name: verified.name, role: verified.role, open: false };
      return { name: caller(call).actor ?? "", role: "admin", open: true };
    }, logger),
  };
  const bindings: ServiceBinding[] = [
    { definition: pb.AccessServiceService, implementation: access_ as unknown as grpc.UntypedServiceImplementation },
    { definition: pb.ResourcePluginServiceService, implementation: plugins as unknown as grpc.UntypedServiceImplementation },
    { definition: pb.SandboxServiceService, implementation: sandboxes as unknown as grpc.UntypedServiceImplementation },
    { definition: pb.RouteGroupServiceService, implementation: routeGroups as unknown as grpc.UntypedServiceImplementation },
    { definition: pb.JobRunnerGroupServiceService, implementation: jobRunnerGroups as unknown as grpc.UntypedServiceImplementation },
    { definition: pb.JobServiceService, implementation: jobs as unknown as grpc.UntypedServiceImplementation },
    { definition: pb.ArtifactServiceService, implementation: artifacts as unknown as grpc.UntypedServiceImplementation },
    { definition: pb.LocalServiceService, implementation: locals as unknown as grpc.UntypedServiceImplementation },
    { definition: pb.LogServiceService, implementation: logs as unknown as grpc.UntypedServiceImplementation },
    { definition: pb.EventServiceService, implementation: events as unknown as grpc.UntypedServiceImplementation },
  ];
  return access ? guard(bindings, access, logger) : bindings;
}

