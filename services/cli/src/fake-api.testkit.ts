// A small in-memory public API on a real gRPC server (127.0.0.1, port 0), and a way to run
// `eph` in-process against it: CLI tests assert what the CLI sends, prints and exits with.
import { ConflictError, NotFoundError, errorMessage, grpc, toServiceError, unary } from "@ephemera/kit";
import * as pb from "@ephemera/proto";
import { run } from "./program.js";

/** One step of what a Watch call does: send a view, fail, end, or pause until released. */
export type WatchStep = pb.SandboxView | { error: Error } | { end: true } | { gate: Promise<void> };

export interface Received {
  method: string;
  request: unknown;
}

export class FakeApi {
  plugins: pb.ResourcePluginVersion[] = [];
  sandboxes = new Map<string, pb.SandboxView>();
  /** What each successive Watch call does; once its steps run out it stays open until cancelled. */
  watchPlans: WatchStep[][] = [];
  watchCalls = 0;
  openWatches = 0;
  logChunks: pb.LogChunk[] = [];
  /** Envelopes (as JSON text) replayed by EventService.Watch; with follow the call then stays open. */
  events: string[] = [];
  /** Makes the next calls of a method fail with this error. */
  failures = new Map<string, Error>();
  readonly received: Received[] = [];

  private constructor(
    private readonly server: grpc.Server,
    readonly address: string,
  ) {}

  static async start(): Promise<FakeApi> {
    const server = new grpc.Server();
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    const fake = new FakeApi(server, `127.0.0.1:${port}`);
    server.addService(pb.ResourcePluginServiceService, fake.pluginService());
    server.addService(pb.SandboxServiceService, fake.sandboxService());
    server.addService(pb.LogServiceService, fake.logService());
    server.addService(pb.EventServiceService, fake.eventService());
    return fake;
  }

  stop(): void {
    this.server.forceShutdown();
  }

  requestsOf(method: string): unknown[] {
    return this.received.filter((r) => r.method === method).map((r) => r.request);
  }

  private handle<Req, Res>(method: string, fn: (req: Req) => Res) {
    return unary<Req, Res>(async (req) => {
      this.received.push({ method, request: req });
      const failure = this.failures.get(method);
      if (failure) throw failure;
      return fn(req);
    });
  }

  private pluginService(): pb.ResourcePluginServiceServer {
    return {
      apply: this.handle("plugin.apply", (req: pb.ApplyResourcePluginRequest): pb.ApplyResourcePluginResponse => {
        const [name = "", version = "0.0.0"] = (req.plugin?.name ?? "").split("@");
        const spec = req.plugin?.spec;
        const existing = this.plugins.find((p) => p.name === name && p.version === version);
        if (existing) {
          const same = JSON.stringify(pb.ResourcePluginSpec.toJSON(existing.spec!)) === JSON.stringify(pb.ResourcePluginSpec.toJSON(spec!));
          if (!same) throw new ConflictError(`plugin ${name}@${version} is published with a different spec; publish a new version`);
          return { plugin: existing, unchanged: true };
        }
        const created: pb.ResourcePluginVersion = { name, version, spec, digest: "sha256:x", createdAt: "2026-01-02T03:04:05.678Z", sandboxes: [] };
        this.plugins.push(created);
        return { plugin: created, unchanged: false };
      }),
      get: this.handle("plugin.get", (req: pb.GetResourcePluginRequest): pb.ResourcePluginVersion => {
        const [name, version] = req.ref.split("@");
        const found = this.plugins.filter((p) => p.name === name && (!version || version === "latest" || p.version === version));
        const last = found[found.length - 1];
        if (!last) throw new NotFoundError(`plugin ${req.ref} not found`);
        return last;
      }),
      list: this.handle("plugin.list", (): pb.ListResourcePluginsResponse => ({ plugins: this.plugins })),
      delete: this.handle("plugin.delete", (req: pb.DeleteResourcePluginRequest): pb.DeleteResourcePluginResponse => {
        const [name, version] = req.ref.split("@");
        const matching = this.plugins.filter((p) => p.name === name && (!version || p.version === version));
        if (!matching.length) throw new NotFoundError(`plugin ${req.ref} not found`);
        const inUse = matching.filter((p) => p.sandboxes.length);
        if (inUse.length) {
          throw new ConflictError(`plugin ${req.ref} is used by sandboxes ${inUse.flatMap((p) => p.sandboxes).join(", ")}`);
        }
        this.plugins = this.plugins.filter((p) => !matching.includes(p));
        return { deleted: matching.map((p) => `${p.name}@${p.version}`) };
      }),
    };
  }

  private sandboxService(): pb.SandboxServiceServer {
    return {
      apply: this.handle("sandbox.apply", (req: pb.ApplySandboxRequest): pb.ApplySandboxResponse => {
        const name = req.sandbox?.name ?? "";
        const existing = this.sandboxes.get(name);
        const view = existing ?? sandboxView(name, { reason: "Creating", spec: req.sandbox?.spec });
        this.sandboxes.set(name, view);
        return { sandbox: view, created: !existing, unchanged: !!existing };
      }),
      get: this.handle("sandbox.get", (req: pb.GetSandboxRequest): pb.SandboxView => {
        const view = this.sandboxes.get(req.name);
        if (!view) throw new NotFoundError(`sandbox ${req.name} not found`);
        if (req.showOutputs) return view;
        return { ...view, resources: view.resources.map((r) => ({ ...r, outputs: r.outputs.map((o) => ({ key: o.key, size: o.size })) })) };
      }),
      list: this.handle("sandbox.list", (): pb.ListSandboxesResponse => ({ sandboxes: [...this.sandboxes.values()] })),
      delete: this.handle("sandbox.delete", (req: pb.DeleteSandboxRequest): pb.SandboxView => {
        const view = this.sandboxes.get(req.name);
        if (!view) throw new NotFoundError(`sandbox ${req.name} not found`);
        const next = { ...view, status: { ready: false, reason: req.force ? "Deleted" : "Deleting", message: "" } };
        if (req.force) this.sandboxes.delete(req.name);
        else this.sandboxes.set(req.name, next);
        return next;
      }),
      watch: (call) => {
        this.received.push({ method: "sandbox.watch", request: call.request });
        const plan = this.watchPlans[this.watchCalls++] ?? [];
        void this.play(call, plan);
      },
    };
  }

  private async play(call: grpc.ServerWritableStream<pb.GetSandboxRequest, pb.SandboxView>, plan: WatchStep[]): Promise<void> {
    let cancelled = false;
    this.openWatches++;
    const closed = () => {
      if (!cancelled) this.openWatches--;
      cancelled = true;
    };
    call.on("cancelled", closed);
    call.on("finish", closed);
    for (const step of plan) {
      if (cancelled) return;
      if ("gate" in step) await step.gate;
      else if ("error" in step) return void call.emit("error", toServiceError(step.error));
      else if ("end" in step) return void call.end();
      else call.write(step);
    }
  }

  private logService(): pb.LogServiceServer {
    return {
      get: (call) => {
        this.received.push({ method: "logs.get", request: call.request });
        const { step, phase } = call.request;
        for (const c of this.logChunks) if ((!step || c.step === step) && (!phase || c.phase === phase)) call.write(c);
        call.end();
      },
    };
  }

  private eventService(): pb.EventServiceServer {
    return {
      watch: (call) => {
        this.received.push({ method: "events.watch", request: call.request });
        for (const json of this.events) call.write({ json });
        if (!call.request.follow) call.end();
      },
    };
  }
}

export function sandboxView(
  name: string,
  opts: { reason: string; ready?: boolean; message?: string; spec?: pb.SandboxSpec; resources?: pb.ResourceView[] },
): pb.SandboxView {
  return pb.SandboxView.fromPartial({
    name,
    routingKey: "rk123",
    spec: opts.spec ?? { cluster: "local" },
    status: { ready: opts.ready ?? false, reason: opts.reason, message: opts.message ?? "" },
    endpoints: [{ name: "web", target: "http://web:8080", url: "https://web--rk123.preview.local" }],
    resources: opts.resources ?? [],
    createdAt: "2026-01-02T03:04:05.000Z",
    updatedAt: "2026-01-02T03:04:06.000Z",
  });
}

export function resourceView(
  name: string,
  status: string,
  steps: Array<[string, string, number?]>,
  extra: Partial<pb.ResourceView> = {},
  phase = "create",
): pb.ResourceView {
  return pb.ResourceView.fromPartial({
    name,
    plugin: "hello-db",
    version: "1.0.0",
    status,
    steps: steps.map(([step, st, exitCode]) => ({ name: step, phase, status: st, attempt: 1, runId: `run-${step}`, exitCode })),
    ...extra,
  });
}

export interface Ran {
  code: number;
  stdout: string;
  stderr: string;
  stdoutBytes: Buffer;
}

/** Runs `eph` in-process against `api`; `live` sees the output while it runs. */
export async function eph(
  api: string,
  args: string[],
  opts: { stdin?: string; signal?: AbortSignal; env?: Record<string, string>; live?: { stdout: string; stderr: string } } = {},
): Promise<Ran> {
  const out: Buffer[] = [];
  const live = opts.live ?? { stdout: "", stderr: "" };
  const code = await run(args, {
    env: { EPHEMERA_API: api, ...opts.env },
    stdout: { write: (c) => { out.push(Buffer.from(c)); live.stdout += Buffer.from(c).toString(); } },
    stderr: { write: (c) => { live.stderr += Buffer.from(c).toString(); } },
    stdin: opts.stdin === undefined ? undefined : async () => opts.stdin!,
    signal: opts.signal,
  }).catch((err: unknown) => {
    live.stderr += `run() threw: ${errorMessage(err)}`;
    return -1;
  });
  const stdoutBytes = Buffer.concat(out);
  return { code, stdout: stdoutBytes.toString(), stderr: live.stderr, stdoutBytes };
}
