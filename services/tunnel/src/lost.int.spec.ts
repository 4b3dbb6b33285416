// A tunnel that dies without a word (kill -9) loses its locals within the bound: the real
// sandbox service (its tunnel health check, views and Routes API) and the real runner's local
// reconciler (on the simulated Kubernetes API) on the shared NATS JetStream, and the tunnel
// service as its own process (the built services/tunnel/dist/main.js), killed with SIGKILL so
// that nothing of it writes an event. A workstation connects; the local is Connected with a
// rule and Services. The tunnel is killed: the local turns Disconnected with reason
// tunnel-lost, the rule is removed and the Services go. A new tunnel and a reconnect bring all back.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import * as k8s from "@kubernetes/client-node";
import * as pb from "@ephemera/proto";
import { Aggregates, decode } from "@ephemera/events";
import { JetStreamEventStore, connectNats } from "@ephemera/eventstore";
import { call, createLogger, grpc, waitFor } from "@ephemera/kit";
import { startKubeSim, type KubeSim } from "../../kube-sim/src/index.js";
import { start } from "@ephemera/sandbox";
import { TunnelClient } from "./client.js";
import { ApiCalls } from "../../runner/src/driver/kube/calls.js";
import { KubeForkCluster } from "../../runner/src/forks/kube.js";
import { LocalReconciler } from "../../runner/src/forks/local-reconciler.js";
import { askTunnel } from "../../sandbox/src/locals/probe.js";
import { echoServer } from "./tunnel.testkit.js";
import { testNats } from "../../../test/support/servers.js";

const TUNNEL_MAIN = join(__dirname, "..", "dist", "main.js");
/** The bound: a dead tunnel's local is reported disconnected, its rule gone, within 15 s. */
const BOUND_MS = 15_000;
const logger = createLogger("tunnel-lost-test", "silent");
const nats = testNats("tlost");

/** The tunnel service as a process of its own; resolves once it listens, with where. */
async function startTunnelProcess(api: string): Promise<{ child: ChildProcess; address: string }> {
  const child = spawn(process.execPath, [TUNNEL_MAIN], {
    env: {
      PATH: process.env["PATH"] ?? "", NATS_URL: nats.url, EPHEMERA_PREFIX: nats.prefix, EPHEMERA_API: api,
      EPHEMERA_TUNNEL_LISTEN: "127.0.0.1:0", EPHEMERA_METRICS_LISTEN: "127.0.0.1:0", LOG_LEVEL: "info",
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const address = await new Promise<string>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`the tunnel exited (${code}) before listening`)));
    createInterface({ input: child.stdout! }).on("line", (text) => {
      const entry = JSON.parse(text) as { msg?: string; listen?: string };
      if (entry.msg === "tunnel listening" && entry.listen) resolve(entry.listen);
    });
  });
  return { child, address };
}

describe("a tunnel killed without a word", () => {
  let sim: KubeSim;
  let core: k8s.CoreV1Api;
  let service: Awaited<ReturnType<typeof start>>;
  let nc: Awaited<ReturnType<typeof connectNats>>;
  let store: JetStreamEventStore;
  let reconciler: LocalReconciler;
  let api: pb.SandboxServiceClient;
  let routes: pb.routes.RoutesClient;
  let echo: Awaited<ReturnType<typeof echoServer>>;
  const children: ChildProcess[] = [];
  const clients: TunnelClient[] = [];
  const namespace = `tlost-${process.pid}`;

  beforeAll(async () => {
    sim = await startKubeSim({ listen: "127.0.0.1:0", kubeconfigPath: join(mkdtempSync(join(tmpdir(), "tlost-")), "kubeconfig") });
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(sim.kubeconfigPath);
    core = kc.makeApiClient(k8s.CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    await kc.makeApiClient(k8s.AppsV1Api).createNamespacedDeployment({
      namespace,
      body: {
        metadata: { name: "backend" },
        spec: {
          selector: { matchLabels: { app: "backend" } },
          template: {
            metadata: { labels: { app: "backend" } },
            spec: { containers: [{ name: "web", image: "backend:1", command: ["sleep", "1"], ports: [{ name: "http", containerPort: 8080 }] }] },
          },
        },
      },
    });
    await core.createNamespacedService({
      namespace, body: { metadata: { name: "backend" }, spec: { selector: { app: "backend" }, ports: [{ name: "http", port: 80, targetPort: 8080 as never }] } },
    });
    service = await start({
      natsUrl: nats.url, redisUrl: "", prefix: nats.prefix, streamReplicas: 1, listen: "127.0.0.1:0", previewDomain: "preview.test",
      routes: { listen: "127.0.0.1:0", httpListen: "127.0.0.1:0" }, localsCheck: { intervalMs: 500, timeoutMs: 400, strikes: 2 },
    }, logger);
    nc = await connectNats(nats.url, "tunnel-lost-test");
    store = await JetStreamEventStore.open(nc, { prefix: nats.prefix, logger });
    reconciler = new LocalReconciler({
      store, clusterName: "c1", logger, cluster: new KubeForkCluster({ kubeconfig: kc, calls: new ApiCalls(), logger, outputs: async () => new Map() }),
    });
    await reconciler.start();
    api = new pb.SandboxServiceClient(`127.0.0.1:${service.port}`, grpc.credentials.createInsecure());
    routes = new pb.routes.RoutesClient(`127.0.0.1:${service.routes!.port}`, grpc.credentials.createInsecure());
    echo = await echoServer();
  });
  afterAll(async () => {
    for (const client of clients) await Promise.race([client.close(), new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
    for (const child of children) child.kill("SIGKILL");
    await echo?.close();
    api?.close();
    routes?.close();
    await reconciler?.stop();
    await service?.stop();
    await nats.cleanup(nc);
    await nc?.close();
    await sim?.stop();
  });

  const view = async () => (await call<pb.GetSandboxRequest, pb.SandboxView>(api.get.bind(api), { name: "dev", showOutputs: false }))
    .workloads.find((w) => w.kind === "local")!;
  const localEvents = async (routingKey: string) => (await store.read(Aggregates.locals, routingKey)).events.map((e) => decode(e)!);
  const endpointsPort = (name: string) => core.readNamespacedEndpoints({ namespace, name }).then((e) => e.subsets?.[0]?.ports?.[0]?.port, () => undefined);
  const connect = async (api: string) => {
    const tunnel = await startTunnelProcess(api);
    children.push(tunnel.child);
    const client = await TunnelClient.connect({ address: tunnel.address, sandboxes: ["dev"], client: "eph/test workstation" });
    client.on("closed", () => undefined);
    clients.push(client);
    return { ...tunnel, client };
  };

  it("is Disconnected with reason tunnel-lost, its rule removed and its Services gone within 15 s; a new tunnel and a reconnect bring them back", async () => {
    const applied = await call(api.apply.bind(api), {
      sandbox: pb.Sandbox.fromJSON({
        name: "dev", spec: { cluster: "c1", local: [{ name: "backend", from: { kind: "Deployment", namespace, name: "backend" }, mappings: [{ port: 8080, toLocal: `127.0.0.1:${echo.port}` }] }] },
      }),
      dryRun: false,
    });
    const routingKey = applied.sandbox!.routingKey;
    const localService = `backend-${routingKey}-local`;
    const ops: pb.routes.WorkloadRoutingRuleOp[] = [];
    const rules = routes.watchWorkloadRoutingRules(pb.routes.WorkloadRoutingRulesRequest.fromPartial({ routingKey }));
    rules.on("data", (op: pb.routes.WorkloadRoutingRuleOp) => ops.push(op));
    rules.on("error", () => undefined);
    const opsOf = (kind: pb.routes.WatchOp) => ops.filter((o) => o.op === kind).length;
    try {
      // A workstation connects through the first tunnel: Connected, a rule, a Service and Endpoints at the tunnel's listener.
      const first = await connect(`127.0.0.1:${service.port}`);
      const connected = await waitFor(async () => (await localEvents(routingKey)).find((e) => e.type === "ephemera.locals.connected.v1") ?? false,
        { timeoutMs: 10_000, what: "the local connected" });
      expect(connected.data).toMatchObject({ sessionId: first.client.sessionId, tunnel: `http://${first.address}` });
      await waitFor(() => opsOf(pb.routes.WatchOp.ADD) === 1, { timeoutMs: 10_000, what: "the local's rule added" });
      const listener = Number((connected.data as pb.LocalConnected).addresses[0]!.address.split(":").pop());
      await waitFor(async () => (await endpointsPort(localService)) === listener, { timeoutMs: 10_000, what: "the local's Endpoints at the listener" });
      expect(await view()).toMatchObject({ status: "Connected", hosts: [`${localService}.${namespace}.svc`] });
      // What the check asks: the session is open there, an unknown one is not.
      expect(await askTunnel(`http://${first.address}`, [first.client.sessionId, "01unknown"], 2_000))
        .toEqual(new Map([[first.client.sessionId, "open"], ["01unknown", "gone"]]));

      first.child.kill("SIGKILL");
      const killedAt = Date.now();
      await waitFor(() => opsOf(pb.routes.WatchOp.REMOVE) === 1, { timeoutMs: BOUND_MS, what: "the local's rule removed" });
      const lost = (await localEvents(routingKey)).filter((e) => e.type === "ephemera.locals.disconnected.v1");
      expect(lost.map((e) => e.data)).toEqual([{ sandbox: "dev", routingKey, local: "backend", sessionId: first.client.sessionId, reason: "tunnel-lost" }]);
      expect(await view()).toMatchObject({ status: "Disconnected", message: expect.stringMatching(/^tunnel lost \(it stopped answering the health check\) since /), hosts: [] });
      await waitFor(async () => (await endpointsPort(localService)) === undefined, { timeoutMs: BOUND_MS - (Date.now() - killedAt), what: "the local's Endpoints removed" });
      await expect(core.readNamespacedService({ namespace, name: localService })).rejects.toThrow();
      expect(Date.now() - killedAt).toBeLessThan(BOUND_MS);
      // The checks touched no workstation: the session's audit log holds its opening alone (its end died with the tunnel).
      expect((await store.read(Aggregates.tunnel, first.client.sessionId)).events.map((e) => e.type)).toEqual(["ephemera.tunnel.session_opened.v1"]);

      // A new tunnel, a reconnect: Connected again under the new session, the rule and the Services back.
      const second = await connect(`127.0.0.1:${service.port}`);
      await waitFor(() => opsOf(pb.routes.WatchOp.ADD) === 2, { timeoutMs: 10_000, what: "the local's rule added again" });
      expect(await view()).toMatchObject({ status: "Connected", message: expect.stringContaining(`session ${second.client.sessionId}`) });
      const again = (await localEvents(routingKey)).filter((e) => e.type === "ephemera.locals.connected.v1").at(-1)!;
      const port = Number((again.data as pb.LocalConnected).addresses[0]!.address.split(":").pop());
      await waitFor(async () => (await endpointsPort(localService)) === port, { timeoutMs: 10_000, what: "the local's Endpoints at the new listener" });
      expect(ops.map((o) => o.op)).toEqual([pb.routes.WatchOp.SYNCED, pb.routes.WatchOp.ADD, pb.routes.WatchOp.REMOVE, pb.routes.WatchOp.ADD]);
    } finally {
      rules.cancel();
    }
  });
});
