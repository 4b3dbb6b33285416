// A sandbox's local workload through the real sandbox service on the real NATS: the tunnel's
// locals events (and the runner's record of the local's Services) make the view say Connected
// or Disconnected, the sandbox Watch send each change, and the Routes API's watchers get the
// local's rule as an ADD and, on disconnect, a REMOVE. A connection reported for a routing key
// of a sandbox that was deleted is ignored.
import { call, createLogger, grpc, localServiceName, waitFor } from "@ephemera/kit";
import * as pb from "@ephemera/proto";
import { Aggregates, encode, ev, type DomainEvent } from "@ephemera/events";
import { JetStreamEventStore, connectNats, type EventStore } from "@ephemera/eventstore";
import { testNats } from "../../../../test/support/servers.js";
import { start } from "../index.js";

type Running = Awaited<ReturnType<typeof start>>;
const logger = createLogger("locals-test", "silent");
const nats = testNats("locals");

describe("a sandbox's local workloads in its view and in the Routes API", () => {
  let service: Running;
  let store: EventStore;
  let nc: Awaited<ReturnType<typeof connectNats>>;
  let api: pb.SandboxServiceClient;
  let routes: pb.routes.RoutesClient;
  beforeAll(async () => {
    service = await start({
      natsUrl: nats.url, redisUrl: "", prefix: nats.prefix, streamReplicas: 1, listen: "127.0.0.1:0", previewDomain: "preview.test",
      routes: { listen: "127.0.0.1:0", httpListen: "127.0.0.1:0" },
    }, logger);
    nc = await connectNats(nats.url, "locals-test-tunnel");
    store = await JetStreamEventStore.open(nc, { prefix: nats.prefix, logger });
    api = new pb.SandboxServiceClient(`127.0.0.1:${service.port}`, grpc.credentials.createInsecure());
    routes = new pb.routes.RoutesClient(`127.0.0.1:${service.routes!.port}`, grpc.credentials.createInsecure());
  });
  afterAll(async () => {
    api?.close();
    routes?.close();
    await service?.stop();
    await nats.cleanup(nc);
    await nc?.close();
  });

  const appendTo = async (aggregate: string, id: string, events: DomainEvent[], source: string) => {
    const current = await store.read(aggregate, id);
    await store.append(aggregate, id, { revision: current.revision, version: current.version }, events.map(encode), { source });
  };
  const local = { name: "backend", from: { kind: "Deployment", namespace: "shop", name: "backend" }, mappings: [{ port: 8080, toLocal: "localhost:8080" }] };
  const apply = async (name: string) =>
    (await call(api.apply.bind(api), { sandbox: pb.Sandbox.fromJSON({ name, spec: { cluster: "c1", local: [local] } }), dryRun: false })).sandbox!.routingKey;
  const view = (name: string) => call<pb.GetSandboxRequest, pb.SandboxView>(api.get.bind(api), { name, showOutputs: false });
  const localView = async (name: string) => (await view(name)).workloads.find((w) => w.kind === "local")!;
  const connected = (name: string, routingKey: string, session: string) => ev("ephemera.locals.connected.v1", {
    sandbox: name, routingKey, local: "backend", sessionId: session, addresses: [{ port: 8080, address: "10.1.0.5:41000" }],
  });
  /** What the runner records once the local's Service (port 80 → the workload's 8080) is on the cluster. */
  const placed = (name: string, routingKey: string, session: string) => {
    const host = `${localServiceName("backend", routingKey)}.shop.svc`;
    return ev("ephemera.forks.locals_applied.v1", {
      sandbox: name,
      locals: [{ local: "backend", baseline: local.from, sessionId: session, services: [{ host, ports: [80], baselineHost: "backend.shop.svc" }], routes: [{ workloadPort: 8080, host, port: 80 }] }],
    });
  };

  it("Connected while a workstation serves it: the Watch sends it, the Routes API adds its rule; Disconnected: the rule goes, the sandbox stays ready", async () => {
    const routingKey = await apply("dev");
    await waitFor(async () => (await view("dev")).status?.ready === true, { timeoutMs: 10_000, what: "the sandbox ready" });
    expect(await localView("dev")).toMatchObject({ status: "Disconnected", message: "no workstation has connected (eph local connect)", workload: "Deployment shop/backend" });

    const views: pb.SandboxView[] = [];
    const watch = api.watch({ name: "dev", showOutputs: false });
    watch.on("data", (v: pb.SandboxView) => views.push(v));
    watch.on("error", () => undefined);
    const ops: pb.routes.WorkloadRoutingRuleOp[] = [];
    const rules = routes.watchWorkloadRoutingRules(pb.routes.WorkloadRoutingRulesRequest.fromPartial({ routingKey }));
    rules.on("data", (op: pb.routes.WorkloadRoutingRuleOp) => ops.push(op));
    rules.on("error", () => undefined);
    try {
      await waitFor(() => ops.some((o) => o.op === pb.routes.WatchOp.SYNCED), { timeoutMs: 5_000, what: "the rules' watch synced" });
      expect(ops.map((o) => o.op)).toEqual([pb.routes.WatchOp.SYNCED]);

      await appendTo(Aggregates.locals, routingKey, [connected("dev", routingKey, "s1")], "tunnel");
      await appendTo(Aggregates.forks, routingKey, [placed("dev", routingKey, "s1")], "runner");
      const added = await waitFor(() => ops.find((o) => o.op === pb.routes.WatchOp.ADD) ?? false, { timeoutMs: 10_000, what: "the local's rule added" });
      expect(added.route).toEqual({
        routingKey, baseline: { kind: "Deployment", namespace: "shop", name: "backend" }, destinationSandbox: { name: "dev" },
        mappings: [{ workloadPort: 8080, destinations: [{ host: `backend-${routingKey}-local.shop.svc`, port: 80 }] }],
      });
      await waitFor(() => views.some((v) => v.workloads.some((w) => w.kind === "local" && w.status === "Connected")), { timeoutMs: 10_000, what: "the Watch's Connected view" });
      expect(await localView("dev")).toMatchObject({
        status: "Connected", message: expect.stringMatching(/^served by tunnel session s1 since \d{4}-/), hosts: [`backend-${routingKey}-local.shop.svc`],
      });
      expect((await view("dev")).status).toMatchObject({ ready: true, message: "all resources are ready" });

      await appendTo(Aggregates.locals, routingKey, [ev("ephemera.locals.disconnected.v1", { sandbox: "dev", routingKey, local: "backend", sessionId: "s1", reason: "lost" })], "tunnel");
      const removed = await waitFor(() => ops.find((o) => o.op === pb.routes.WatchOp.REMOVE) ?? false, { timeoutMs: 10_000, what: "the local's rule removed" });
      expect(removed.route).toEqual(added.route);
      await waitFor(() => views.at(-1)?.workloads.some((w) => w.kind === "local" && w.status === "Disconnected") ?? false, { timeoutMs: 10_000, what: "the Watch's Disconnected view" });
      expect(await localView("dev")).toMatchObject({ status: "Disconnected", message: expect.stringMatching(/^lost since \d{4}-.* \(session s1\)$/), hosts: [] });
      // As with Signadot: the sandbox stays ready, and says which local is away.
      expect((await view("dev")).status).toEqual(expect.objectContaining({
        ready: true, reason: "Ready", message: "all resources are ready; local workload backend not connected (the baseline serves them)",
      }));
      expect(ops.map((o) => o.op)).toEqual([pb.routes.WatchOp.SYNCED, pb.routes.WatchOp.ADD, pb.routes.WatchOp.REMOVE]);
    } finally {
      watch.cancel();
      rules.cancel();
    }
  });

  it("ignores a connection reported for the routing key of a sandbox that was deleted", async () => {
    const old = await apply("again");
    await call(api.delete.bind(api), { name: "again", force: true });
    await waitFor(async () => (await call(api.list.bind(api), {})).sandboxes.every((s) => s.name !== "again"), { timeoutMs: 10_000, what: "the sandbox deleted" });
    const current = await apply("again");
    expect(current).not.toBe(old);
    await appendTo(Aggregates.locals, old, [connected("again", old, "s-old")], "tunnel");
    await appendTo(Aggregates.forks, old, [placed("again", old, "s-old")], "runner");
    // A later event of the current incarnation, once folded, shows the old one was folded (and left unread) before it.
    await appendTo(Aggregates.locals, current, [ev("ephemera.locals.disconnected.v1", { sandbox: "again", routingKey: current, local: "backend", sessionId: "s-new", reason: "disconnect" })], "tunnel");
    await waitFor(async () => (await localView("again")).message.startsWith("disconnect since"), { timeoutMs: 10_000, what: "the current incarnation's event folded" });
    const all = await call<pb.routes.WorkloadRoutingRulesRequest, pb.routes.GetWorkloadRoutingRulesResponse>(
      routes.getWorkloadRoutingRules.bind(routes), pb.routes.WorkloadRoutingRulesRequest.fromPartial({ destinationSandbox: { name: "again" } }));
    expect(all.routingRules).toEqual([]);
    expect((await localView("again")).status).toBe("Disconnected");
  });
});
