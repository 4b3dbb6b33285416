// A SandboxService in front of the real core's that forwards every call, and whose Watch
// streams can be told to break, end early or go silent. These are transport conditions
// (a proxy resetting the stream, a server restarting, a notification lost on the way)
// that the real core cannot be made to produce on demand; everything else the CLI sees
// through it still comes from the real core.
import { call, grpc, toServiceError, unary } from "@ephemera/kit";
import * as pb from "@ephemera/proto";

type UnaryMethod<Req, Res> = Parameters<typeof call<Req, Res>>[0];

/** What one Watch call does after forwarding `after` views: fail with `error`, end, or stay open and silent. */
export type WatchFault = { after: number } & ({ error: Error } | { end: true } | { silent: true });

export class WatchProxy {
  /** The fault of each successive Watch call; calls beyond the list forward faithfully. */
  faults: WatchFault[] = [];
  watchCalls = 0;
  openWatches = 0;

  private constructor(
    private readonly server: grpc.Server,
    private readonly upstream: pb.SandboxServiceClient,
    readonly address: string,
  ) {}

  /** A proxy of the SandboxService at `target`, listening on 127.0.0.1 (any free port). */
  static async start(target: string): Promise<WatchProxy> {
    const server = new grpc.Server();
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    const proxy = new WatchProxy(server, new pb.SandboxServiceClient(target, grpc.credentials.createInsecure()), `127.0.0.1:${port}`);
    server.addService(pb.SandboxServiceService, proxy.service());
    return proxy;
  }

  stop(): void {
    this.server.forceShutdown();
    this.upstream.close();
  }

  private forward<Req, Res>(method: UnaryMethod<Req, Res>): grpc.handleUnaryCall<Req, Res> {
    return unary((req: Req) => call(method.bind(this.upstream), req, 10_000));
  }

  private service(): pb.SandboxServiceServer {
    const u = this.upstream;
    return {
      apply: this.forward(u.apply),
      get: this.forward(u.get),
      list: this.forward(u.list),
      delete: this.forward(u.delete),
      retry: this.forward(u.retry),
      watch: (down) => this.watch(down),
    };
  }

  private watch(down: grpc.ServerWritableStream<pb.GetSandboxRequest, pb.SandboxView>): void {
    const fault = this.faults[this.watchCalls++];
    this.openWatches++;
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      this.openWatches--;
      up.cancel();
    };
    let views = 0;
    const up = this.upstream.watch(down.request);
    const misbehave = (): boolean => {
      if (!fault || views < fault.after) return false;
      if ("error" in fault) {
        down.emit("error", toServiceError(fault.error));
        close();
      } else if ("end" in fault) {
        down.end();
        close();
      } else {
        up.cancel(); // silent: the client's stream stays open, and nothing more comes
      }
      return true;
    };
    down.on("cancelled", close);
    up.on("data", (view: pb.SandboxView) => {
      if (closed || (fault && views >= fault.after)) return;
      down.write(view);
      views++;
      misbehave();
    });
    up.on("end", () => {
      if (closed || (fault && "silent" in fault && views >= fault.after)) return;
      down.end();
      close();
    });
    up.on("error", (err: grpc.ServiceError) => {
      if (closed || err.code === grpc.status.CANCELLED || (fault && "silent" in fault && views >= fault.after)) return;
      down.emit("error", err);
      close();
    });
    misbehave();
  }
}
