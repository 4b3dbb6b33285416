// The fork reconciler with EPHEMERA_ROUTING_MESH=istio on the simulated API server (in this
// process, serving networking.istio.io/v1 VirtualService as if Istio's CRDs were
// installed) and the in-memory event store: the VirtualService of each baseline Service
// gains a route per sandbox forking its workload, loses it when the sandbox's forks go,
// and is deleted with the last (a leftover route of a crashed runner too); without
// Istio's CRDs the forks fail Rejected, saying why.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as k8s from "@kubernetes/client-node";
import * as pb from "@ephemera/proto";
import { Aggregates, decode, encode, ev, type DomainEvent } from "@ephemera/events";
import { InMemoryEventStore } from "@ephemera/eventstore";
import { startKubeSim, type KubeSim } from "@ephemera/kube-sim";
import { createLogger, waitFor } from "@ephemera/kit";
import { ApiCalls } from "../driver/kube/calls.js";
import { KubeForkCluster } from "./kube.js";
import { ForkReconciler } from "./reconciler.js";

type Obj = k8s.KubernetesObject & { spec?: Record<string, any> }; // eslint-disable-line @typescript-eslint/no-explicit-any

const logger = createLogger("test", "silent");

async function append(store: InMemoryEventStore, aggregate: string, id: string, events: DomainEvent[]): Promise<void> {
  const current = await store.read(aggregate, id);
  await store.append(aggregate, id, { revision: current.revision, version: current.version }, events.map(encode), { source: "test" });
}

describe("the fork reconciler keeping Istio's VirtualServices", () => {
  let sim: KubeSim;
  let kc: k8s.KubeConfig;
  let api: k8s.KubernetesObjectApi;
  let reconciler: ForkReconciler | undefined;
  const namespace = `mesh-${process.pid}`;
  const ordersFork = pb.Fork.fromPartial({ forkOf: { kind: "Deployment", namespace, name: "orders" } });

  beforeAll(async () => {
    sim = await startKubeSim({ listen: "127.0.0.1:0", runtime: "process", kubeconfigPath: join(mkdtempSync(join(tmpdir(), "mesh-int-")), "kubeconfig") });
    kc = new k8s.KubeConfig();
    kc.loadFromFile(sim.kubeconfigPath);
    api = k8s.KubernetesObjectApi.makeApiClient(kc);
    await kc.makeApiClient(k8s.CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
    await kc.makeApiClient(k8s.AppsV1Api).createNamespacedDeployment({
      namespace,
      body: {
        metadata: { name: "orders" },
        spec: {
          selector: { matchLabels: { app: "orders" } },
          template: { metadata: { labels: { app: "orders" } }, spec: { containers: [{ name: "web", image: "orders:1", command: ["sleep", "1"] }] } },
        },
      },
    });
    // Two Services in front of the same pods: each gets its own VirtualService.
    for (const [name, port] of [["orders", 8080], ["orders-grpc", 9090]] as const) {
      await kc.makeApiClient(k8s.CoreV1Api).createNamespacedService({ namespace, body: { metadata: { name }, spec: { selector: { app: "orders" }, ports: [{ port }] } } });
    }
  });
  afterEach(async () => {
    await fetch(`${sim.url}/sim/faults`, { method: "DELETE" });
    await reconciler?.stop();
    reconciler = undefined;
  });
  afterAll(async () => sim?.stop());

  const start = async (mesh: "istio" | "none") => {
    const store = new InMemoryEventStore();
    const cluster = new KubeForkCluster({ kubeconfig: kc, calls: new ApiCalls(), logger, outputs: async () => new Map(), mesh });
    reconciler = new ForkReconciler({ store, cluster, clusterName: "c1", logger });
    await reconciler.start();
    return store;
  };
  const ask = (store: InMemoryEventStore, sandbox: string, routingKey: string, generation: number, forks: pb.Fork[]) =>
    append(store, Aggregates.sandbox, sandbox, [
      ...(generation === 1 ? [ev("ephemera.sandbox.created.v1", { name: sandbox, routingKey, spec: { cluster: "c1" } })] : []),
      ev("ephemera.sandbox.forks_requested.v1", { sandbox, routingKey, cluster: "c1", generation, forks, resources: [] }),
    ]);
  const recorded = async (store: InMemoryEventStore, routingKey: string) => (await store.read(Aggregates.forks, routingKey)).events.map((e) => decode(e)!);
  const applied = (store: InMemoryEventStore, routingKey: string, generation: number) => waitFor(async () => {
    const e = (await recorded(store, routingKey)).find((x) => x.type === "ephemera.forks.applied.v1" && x.data.generation === generation);
    return e?.type === "ephemera.forks.applied.v1" ? e.data : false;
  }, { timeoutMs: 10_000, what: `generation ${generation} of ${routingKey} applied` });
  const virtualService = (service: string) =>
    api.read<Obj>({ apiVersion: "networking.istio.io/v1", kind: "VirtualService", metadata: { name: `ephemera-${service}`, namespace } })
      .catch((err: unknown) => { if ((err as { code?: number }).code === 404) return undefined; throw err; });
  const routes = async (service: string) => ((await virtualService(service))?.spec?.["http"] as Array<{ name: string; route: Array<{ destination: { host: string } }> }> | undefined)
    ?.map((r) => [r.name, r.route[0]!.destination.host]);

  it("routes each sandbox's key to its fork Service, per baseline Service, and removes the VirtualService with the last fork", async () => {
    // Left by a runner that died after sweeping a fork Service and before removing its route.
    await api.create({
      apiVersion: "networking.istio.io/v1", kind: "VirtualService",
      metadata: { name: "ephemera-legacy", namespace, labels: { "ephemera.dev/mesh": "istio", "ephemera.dev/baseline-service": "legacy" } },
      spec: { hosts: ["legacy"], http: [{ name: "sandbox-gone00000000", route: [{ destination: { host: `legacy-gone00000000.${namespace}.svc.cluster.local` } }] }] },
    });
    const store = await start("istio");
    await ask(store, "sb-a", "aaaa00000001", 1, [ordersFork]);
    await ask(store, "sb-b", "bbbb00000002", 1, [ordersFork]);
    const placed = await applied(store, "aaaa00000001", 1);
    // Where the Routes API learns each fork Service's baseline Service from.
    expect(placed.forks[0]!.services.map((s) => [s.host, s.baselineHost])).toEqual([
      [`orders-aaaa00000001.${namespace}.svc`, `orders.${namespace}.svc`],
      [`orders-grpc-aaaa00000001.${namespace}.svc`, `orders-grpc.${namespace}.svc`],
    ]);
    await applied(store, "bbbb00000002", 1);
    // Its fork Services gone, the leftover goes with the next generation written in its namespace.
    expect(await virtualService("legacy")).toBeUndefined();
    const both = [
      ["sandbox-aaaa00000001", `orders-aaaa00000001.${namespace}.svc.cluster.local`],
      ["sandbox-bbbb00000002", `orders-bbbb00000002.${namespace}.svc.cluster.local`],
      ["baseline", `orders.${namespace}.svc.cluster.local`],
    ];
    await waitFor(async () => JSON.stringify(await routes("orders")) === JSON.stringify(both), { timeoutMs: 10_000, what: "both sandboxes' routes" });
    const vs = (await virtualService("orders"))!;
    expect(vs.metadata?.labels).toEqual({ "ephemera.dev/mesh": "istio", "ephemera.dev/baseline-service": "orders" });
    expect(vs.spec?.["hosts"]).toEqual(["orders", `orders.${namespace}.svc.cluster.local`]);
    expect(vs.spec?.["http"][0].match[1]).toEqual({ headers: { "ot-baggage-sd-routing-key": { exact: "aaaa00000001" } } });
    expect((await routes("orders-grpc"))?.map(([name]) => name)).toEqual(["sandbox-aaaa00000001", "sandbox-bbbb00000002", "baseline"]);

    // The first sandbox's forks go: its routes with them, the other's stay.
    await ask(store, "sb-a", "aaaa00000001", 2, []);
    await applied(store, "aaaa00000001", 2);
    expect(await routes("orders")).toEqual([both[1], both[2]]);
    expect((await routes("orders-grpc"))?.map(([name]) => name)).toEqual(["sandbox-bbbb00000002", "baseline"]);

    // The last fork goes: so do the VirtualServices.
    await ask(store, "sb-b", "bbbb00000002", 2, []);
    await applied(store, "bbbb00000002", 2);
    expect(await virtualService("orders")).toBeUndefined();
    expect(await virtualService("orders-grpc")).toBeUndefined();
  });

  it("writes no VirtualService without the mesh", async () => {
    const store = await start("none");
    await ask(store, "sb-c", "cccc00000003", 1, [ordersFork]);
    await applied(store, "cccc00000003", 1);
    expect((await api.list("networking.istio.io/v1", "VirtualService", namespace)).items).toEqual([]);
    await ask(store, "sb-c", "cccc00000003", 2, []);
    await applied(store, "cccc00000003", 2);
  });

  it("fails the forks Rejected, saying Istio is missing, when the cluster serves no VirtualService", async () => {
    // What an API server without Istio's CRDs answers a create of one.
    const faults = await fetch(`${sim.url}/sim/faults`, {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ apiErrors: { next: 1, codes: [404], verbs: ["create"], resources: ["virtualservices"] } }),
    });
    expect(faults.ok).toBe(true);
    const store = await start("istio");
    await ask(store, "sb-d", "dddd00000004", 1, [ordersFork]);
    const failed = await waitFor(async () => (await recorded(store, "dddd00000004")).find((e) => e.type === "ephemera.forks.failed.v1") ?? false,
      { timeoutMs: 10_000, what: "the forks failed" });
    expect(failed.type === "ephemera.forks.failed.v1" && failed.data.failure).toEqual({
      fork: "", reason: "Rejected",
      message: "the cluster serves no networking.istio.io/v1 VirtualService (EPHEMERA_ROUTING_MESH=istio needs Istio's CRDs installed)",
    });
    // Removed with the sandbox, as anything a failed apply wrote.
    await ask(store, "sb-d", "dddd00000004", 2, []);
    await applied(store, "dddd00000004", 2);
    expect((await api.list("v1", "Service", namespace, undefined, undefined, undefined, undefined, "ephemera.dev/routing-key=dddd00000004")).items).toEqual([]);
  });
});
