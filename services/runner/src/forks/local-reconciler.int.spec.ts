// The local workloads' reconciler with the Kubernetes cluster on the simulated API server
// (in this process) and the in-memory event store: a connected local gets a Service without
// a selector and an Endpoints object pointing at the tunnel for each Service of its baseline,
// recorded for the Routes API; a disconnect removes them, a reconnect writes them again, and
// the sandbox's deletion removes them. The fork reconciler's sweep leaves them alone.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as k8s from "@kubernetes/client-node";
import * as pb from "@ephemera/proto";
import { Aggregates, decode, encode, ev, type DomainEvent, type EventOf } from "@ephemera/events";
import { InMemoryEventStore } from "@ephemera/eventstore";
import { startKubeSim, type KubeSim } from "@ephemera/kube-sim";
import { createLogger, waitFor } from "@ephemera/kit";
import { ApiCalls } from "../driver/kube/calls.js";
import { KubeForkCluster } from "./kube.js";
import { LocalReconciler } from "./local-reconciler.js";
import { ForkReconciler } from "./reconciler.js";

const logger = createLogger("test", "silent");

async function append(store: InMemoryEventStore, aggregate: string, id: string, events: DomainEvent[]): Promise<void> {
  const current = await store.read(aggregate, id);
  await store.append(aggregate, id, { revision: current.revision, version: current.version }, events.map(encode), { source: "test" });
}

describe("the local workloads' reconciler on a Kubernetes cluster", () => {
  let sim: KubeSim;
  let kc: k8s.KubeConfig;
  let core: k8s.CoreV1Api;
  const stops: Array<() => Promise<void>> = [];
  const namespace = `locals-${process.pid}`;
  beforeAll(async () => {
    sim = await startKubeSim({ listen: "127.0.0.1:0", kubeconfigPath: join(mkdtempSync(join(tmpdir(), "locals-int-")), "kubeconfig") });
    kc = new k8s.KubeConfig();
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
            metadata: { labels: { app: "backend", tier: "api" } },
            spec: { containers: [{ name: "web", image: "backend:1", command: ["sleep", "1"], ports: [{ name: "http", containerPort: 8080 }] }] },
          },
        },
      },
    });
    // Two Services select backend's pods: one by a named targetPort (and a port no mapping serves), one by number. One does not.
    await core.createNamespacedService({
      namespace,
      body: {
        metadata: { name: "backend" },
        spec: { selector: { app: "backend" }, ports: [{ name: "http", port: 80, targetPort: "http" as never }, { name: "admin", port: 9000, targetPort: 9000 as never }] },
      },
    });
    await core.createNamespacedService({
      namespace, body: { metadata: { name: "backend-direct" }, spec: { selector: { tier: "api" }, ports: [{ port: 8080, targetPort: 8080 as never }] } },
    });
    await core.createNamespacedService({
      namespace, body: { metadata: { name: "frontend" }, spec: { selector: { app: "frontend" }, ports: [{ port: 80 }] } },
    });
  });
  afterEach(async () => { for (const stop of stops.splice(0)) await stop(); });
  afterAll(async () => sim?.stop());

  const local = pb.Local.fromPartial({ name: "backend", from: { kind: "Deployment", namespace, name: "backend" }, mappings: [{ port: 8080, toLocal: "localhost:8080" }] });
  const connected = (session: string, port: number) => ev("ephemera.locals.connected.v1", {
    sandbox: "sb", routingKey: "rk1", local: "backend", sessionId: session, addresses: [{ port: 8080, address: `127.0.0.1:${port}` }],
  });
  const lastRecord = async (store: InMemoryEventStore) => (await store.read(Aggregates.forks, "rk1")).events.map((e) => decode(e)!)
    .filter((e): e is EventOf<"ephemera.forks.locals_applied.v1"> => e.type === "ephemera.forks.locals_applied.v1").at(-1)?.data.locals;
  const gone = async (name: string) => {
    const [svc, eps] = await Promise.all([
      core.readNamespacedService({ namespace, name }).then(() => true, () => false),
      core.readNamespacedEndpoints({ namespace, name }).then(() => true, () => false),
    ]);
    return !svc && !eps;
  };

  it("writes a selector-less Service and tunnel Endpoints per baseline Service while connected; removes them on disconnect and deletion; writes them again on reconnect", async () => {
    const store = new InMemoryEventStore();
    const cluster = new KubeForkCluster({ kubeconfig: kc, calls: new ApiCalls(), logger, outputs: async () => new Map() });
    await append(store, Aggregates.sandbox, "sb", [ev("ephemera.sandbox.created.v1", { name: "sb", routingKey: "rk1", spec: { cluster: "c1", local: [local] } })]);
    const reconciler = new LocalReconciler({ store, cluster, clusterName: "c1", logger });
    await reconciler.start();
    stops.push(() => reconciler.stop());

    await append(store, Aggregates.locals, "rk1", [connected("s1", 41000)]);
    const placed = await waitFor(async () => (await lastRecord(store))?.length ? (await lastRecord(store))! : false, { timeoutMs: 10_000, what: "the local's Services recorded" });
    expect(placed).toEqual([pb.LocalPlacement.fromPartial({
      local: "backend", baseline: { kind: "Deployment", namespace, name: "backend" }, sessionId: "s1",
      services: [
        { host: `backend-rk1-local.${namespace}.svc`, ports: [80], baselineHost: `backend.${namespace}.svc` },
        { host: `backend-direct-rk1-local.${namespace}.svc`, ports: [8080], baselineHost: `backend-direct.${namespace}.svc` },
      ],
      routes: [{ workloadPort: 8080, host: `backend-rk1-local.${namespace}.svc`, port: 80 }],
    })]);
    const svc = await core.readNamespacedService({ namespace, name: "backend-rk1-local" });
    expect(svc.spec?.selector).toBeUndefined();
    expect(svc.spec?.clusterIP).toBeTruthy();
    expect(svc.spec?.ports?.map((p) => ({ name: p.name, port: p.port, targetPort: p.targetPort }))).toEqual([{ name: "http", port: 80, targetPort: 41000 }]);
    expect(svc.metadata?.labels).toMatchObject({ "ephemera.dev/routing-key": "rk1", "ephemera.dev/local": "backend", "ephemera.dev/baseline-service": "backend" });
    const eps = await core.readNamespacedEndpoints({ namespace, name: "backend-rk1-local" });
    expect(eps.subsets).toEqual([{ addresses: [{ ip: "127.0.0.1" }], ports: [{ name: "http", port: 41000, protocol: "TCP" }] }]);
    // The simulator's endpoints controller leaves a selector-less Service's Endpoints as written.
    await core.patchNamespacedService({ namespace, name: "backend-rk1-local", body: { metadata: { annotations: { touched: "yes" } } } },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch));
    expect((await core.readNamespacedEndpoints({ namespace, name: "backend-rk1-local" })).subsets).toEqual(eps.subsets);
    expect(await gone(`frontend-rk1-local`)).toBe(true);

    // The fork reconciler, applying a generation without forks, sweeps the routing key's fork objects but not these.
    const forks = new ForkReconciler({ store, cluster, clusterName: "c1", logger });
    await append(store, Aggregates.sandbox, "sb", [ev("ephemera.sandbox.forks_requested.v1", {
      sandbox: "sb", routingKey: "rk1", cluster: "c1", generation: 1, resources: [],
      forks: [pb.Fork.fromPartial({ forkOf: { kind: "Deployment", namespace, name: "backend" } })],
    })]);
    await forks.start();
    stops.push(() => forks.stop());
    await waitFor(async () => (await store.read(Aggregates.forks, "rk1")).events.some((e) => e.type === "ephemera.forks.applied.v1"), { timeoutMs: 10_000, what: "the fork applied" });
    expect(await gone("backend-rk1-local")).toBe(false);

    await append(store, Aggregates.locals, "rk1", [ev("ephemera.locals.disconnected.v1", { sandbox: "sb", routingKey: "rk1", local: "backend", sessionId: "s1", reason: "lost" })]);
    await waitFor(async () => (await lastRecord(store))?.length === 0, { timeoutMs: 10_000, what: "the local's Services recorded removed" });
    expect(await gone("backend-rk1-local")).toBe(true);
    expect(await gone("backend-direct-rk1-local")).toBe(true);

    await append(store, Aggregates.locals, "rk1", [connected("s2", 42000)]);
    await waitFor(async () => (await lastRecord(store))?.[0]?.sessionId === "s2", { timeoutMs: 10_000, what: "the local's Services written again" });
    expect((await core.readNamespacedEndpoints({ namespace, name: "backend-rk1-local" })).subsets?.[0]?.ports?.[0]?.port).toBe(42000);

    await append(store, Aggregates.sandbox, "sb", [ev("ephemera.sandbox.deleting.v1", {})]);
    await waitFor(async () => (await lastRecord(store))?.length === 0, { timeoutMs: 10_000, what: "the deleted sandbox's local Services removed" });
    expect(await gone("backend-rk1-local")).toBe(true);
    // Deleting is not deleted: kept. Deleted, with nothing of it on the cluster: it and its routing key's records leave memory.
    expect(reconciler.desires.get("sb")?.state?.ending).toBe(true);
    await append(store, Aggregates.sandbox, "sb", [ev("ephemera.sandbox.deleted.v1", { forced: false })]);
    await waitFor(() => reconciler.desires.get("sb") === undefined, { timeoutMs: 10_000, what: "the deleted sandbox to leave memory" });
    expect([reconciler.desires.size, reconciler.served.size, reconciler.records.size]).toEqual([0, 0, 0]);
  });

  it("removes a connected local's Service and Endpoints once an update drops it from the sandbox", async () => {
    const store = new InMemoryEventStore();
    const cluster = new KubeForkCluster({ kubeconfig: kc, calls: new ApiCalls(), logger, outputs: async () => new Map() });
    await append(store, Aggregates.sandbox, "sb", [ev("ephemera.sandbox.created.v1", { name: "sb", routingKey: "rk1", spec: { cluster: "c1", local: [local] } })]);
    await append(store, Aggregates.locals, "rk1", [connected("s1", 43000)]);
    const reconciler = new LocalReconciler({ store, cluster, clusterName: "c1", logger });
    await reconciler.start();
    stops.push(() => reconciler.stop());
    await waitFor(async () => (await lastRecord(store))?.length === 1, { timeoutMs: 10_000, what: "the local's Services written at start" });
    await append(store, Aggregates.sandbox, "sb", [ev("ephemera.sandbox.updated.v1", { spec: { cluster: "c1", local: [] } })]);
    await waitFor(async () => (await lastRecord(store))?.length === 0, { timeoutMs: 10_000, what: "the dropped local's Services removed" });
    expect(await gone("backend-rk1-local")).toBe(true);
  });

  it("records why nothing routes to a connected local whose baseline is not on the cluster, and writes nothing for it", async () => {
    const store = new InMemoryEventStore();
    const cluster = new KubeForkCluster({ kubeconfig: kc, calls: new ApiCalls(), logger, outputs: async () => new Map() });
    const absent = pb.Local.fromPartial({ ...local, from: { kind: "Deployment", namespace, name: "absent" } });
    await append(store, Aggregates.sandbox, "sb", [ev("ephemera.sandbox.created.v1", { name: "sb", routingKey: "rk1", spec: { cluster: "c1", local: [absent] } })]);
    await append(store, Aggregates.locals, "rk1", [connected("s1", 44000)]);
    const reconciler = new LocalReconciler({ store, cluster, clusterName: "c1", logger });
    await reconciler.start();
    stops.push(() => reconciler.stop());
    const placed = await waitFor(async () => (await lastRecord(store))?.length ? (await lastRecord(store))! : false, { timeoutMs: 10_000, what: "the local's placement recorded" });
    expect(placed).toEqual([pb.LocalPlacement.fromPartial({
      local: "backend", baseline: { kind: "Deployment", namespace, name: "absent" }, sessionId: "s1",
      problem: `baseline Deployment ${namespace}/absent not found on cluster c1: no Service to route`,
    })]);
    expect(await gone("absent-rk1-local")).toBe(true);
  });
});
