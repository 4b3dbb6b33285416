// The fork reconciler with the Kubernetes fork cluster on the simulated API server (in this
// process) and the in-memory event store: what it records, and what it writes, when a
// sandbox's forks read more outputs than one Secret may hold; a fork's env with a variable
// deleted and another fork's Service by an expression; and one reading a fork that has no
// Service.
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

const logger = createLogger("test", "silent");
const MiB = 1024 * 1024;

async function append(store: InMemoryEventStore, aggregate: string, id: string, events: DomainEvent[]): Promise<void> {
  const current = await store.read(aggregate, id);
  await store.append(aggregate, id, { revision: current.revision, version: current.version }, events.map(encode), { source: "test" });
}

describe("the fork reconciler on a Kubernetes cluster", () => {
  let sim: KubeSim;
  let kc: k8s.KubeConfig;
  let reconciler: ForkReconciler | undefined;
  const namespace = `shop-${process.pid}`;
  beforeAll(async () => {
    sim = await startKubeSim({ listen: "127.0.0.1:0", kubeconfigPath: join(mkdtempSync(join(tmpdir(), "forks-int-")), "kubeconfig") });
    kc = new k8s.KubeConfig();
    kc.loadFromFile(sim.kubeconfigPath);
    await kc.makeApiClient(k8s.CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
    const apps = kc.makeApiClient(k8s.AppsV1Api);
    const core = kc.makeApiClient(k8s.CoreV1Api);
    for (const name of ["orders", "cart", "worker"]) {
      await apps.createNamespacedDeployment({
        namespace,
        body: {
          metadata: { name },
          spec: {
            selector: { matchLabels: { app: name } },
            template: {
              metadata: { labels: { app: name } },
              spec: {
                containers: [{ name: "web", image: `${name}:1`, command: ["sleep", "1"], env: [{ name: "MODE", value: "baseline" }] }],
              },
            },
          },
        },
      });
    }
    // cart has a Service (port 80 to the container's 8080) named otherwise than the workload; worker has none.
    await core.createNamespacedService({
      namespace,
      body: { metadata: { name: "cart-api" }, spec: { selector: { app: "cart" }, ports: [{ name: "http", port: 80, targetPort: 8080 }] } },
    });
  });
  afterEach(async () => reconciler?.stop());
  afterAll(async () => sim?.stop());

  it("fails the forks OutputsTooLarge when their outputs would pass 1 MiB in one Secret, naming keys and sizes, and writes nothing", async () => {
    const store = new InMemoryEventStore();
    const values = new Map([["db.provision.dump", Buffer.alloc(MiB - 100, "v")], ["db.provision.schema", Buffer.alloc(200, "v")]]);
    const cluster = new KubeForkCluster({ kubeconfig: kc, calls: new ApiCalls(), logger, outputs: async () => values });
    const fork = pb.Fork.fromPartial({
      forkOf: { kind: "Deployment", namespace, name: "orders" },
      customizations: {
        env: ["provision.dump", "provision.schema"].map((k, i) => ({ name: `V${i}`, valueFrom: { resource: { name: "db", outputKey: k } } })),
      },
    });
    await append(store, Aggregates.sandbox, "sb", [
      ev("ephemera.sandbox.created.v1", { name: "sb", routingKey: "rk1", spec: { cluster: "c1" } }),
      ev("ephemera.sandbox.forks_requested.v1", { sandbox: "sb", routingKey: "rk1", cluster: "c1", generation: 1, forks: [fork], resources: [] }),
    ]);
    const writesBefore = writes(sim);
    reconciler = new ForkReconciler({ store, cluster, clusterName: "c1", logger });
    await reconciler.start();

    // What the reconciler records first: applied, or why not.
    const first = await waitFor(async () => (await store.read(Aggregates.forks, "rk1")).events.map((e) => decode(e)!)[0] ?? false,
      { timeoutMs: 10_000, what: "what became of the forks recorded" });
    expect(first.type).toBe("ephemera.forks.failed.v1");
    const failure = (first.data as { failure: pb.ForkFailure }).failure;
    expect(failure.reason).toBe("OutputsTooLarge");
    expect(failure.message).toBe(`the outputs the forks in namespace ${namespace} read total 1048676 bytes, over the 1048576 bytes (1 MiB) `
      + "a Kubernetes Secret may hold: db.provision.dump (1048476 bytes), db.provision.schema (200 bytes)");
    // Nothing was written: no fork, no Service, no Secret.
    expect(writes(sim)).toBe(writesBefore);
    const secrets = await kc.makeApiClient(k8s.CoreV1Api).listNamespacedSecret({ namespace });
    expect(secrets.items).toEqual([]);
    const deployments = await kc.makeApiClient(k8s.AppsV1Api).listNamespacedDeployment({ namespace });
    expect(deployments.items.map((d) => d.metadata?.name).sort()).toEqual(["cart", "orders", "worker"]);
  });

  const forkOf = (name: string) => ({ kind: "Deployment", namespace, name });
  const fromFork = (env: string, name: string, expression: string) =>
    ({ name: env, valueFrom: { fork: { forkOf: forkOf(name), expression } } });
  async function reconcile(sandbox: string, routingKey: string, forks: pb.Fork[]) {
    const store = new InMemoryEventStore();
    const cluster = new KubeForkCluster({ kubeconfig: kc, calls: new ApiCalls(), logger, outputs: async () => new Map() });
    await append(store, Aggregates.sandbox, sandbox, [
      ev("ephemera.sandbox.created.v1", { name: sandbox, routingKey, spec: { cluster: "c1" } }),
      ev("ephemera.sandbox.forks_requested.v1", { sandbox, routingKey, cluster: "c1", generation: 1, forks, resources: [] }),
    ]);
    reconciler = new ForkReconciler({ store, cluster, clusterName: "c1", logger });
    await reconciler.start();
    return waitFor(async () => (await store.read(Aggregates.forks, routingKey)).events.map((e) => decode(e)!)[0] ?? false,
      { timeoutMs: 10_000, what: "what became of the forks recorded" });
  }

  it("writes a fork without the variable its env deletes, and with another fork's Service as its expression reads it", async () => {
    const first = await reconcile("sb-env", "rk2", [
      pb.Fork.fromPartial({
        forkOf: forkOf("orders"),
        customizations: {
          env: [
            { name: "MODE", operation: "delete" },
            fromFork("CART_ADDR", "cart", "{{ .Service.Host }}:{{ .Service.Port }}"),
            fromFork("CART_URL", "cart", "http://{{.Service.Host}}:{{ .Service.Port }}/api"),
          ],
        },
      }),
      pb.Fork.fromPartial({ forkOf: forkOf("cart") }),
    ]);
    expect(first.type).toBe("ephemera.forks.applied.v1");
    const fork = await kc.makeApiClient(k8s.AppsV1Api).readNamespacedDeployment({ namespace, name: "orders-rk2" });
    const env = fork.spec!.template.spec!.containers[0]!.env!;
    expect(env.map((e) => e.name)).not.toContain("MODE");
    // The fork Service of the baseline Service in front of cart (cart-api), not one named after the workload;
    // its port, not the container's.
    expect(env).toContainEqual({ name: "CART_ADDR", value: `cart-api-rk2.${namespace}.svc:80` });
    expect(env).toContainEqual({ name: "CART_URL", value: `http://cart-api-rk2.${namespace}.svc:80/api` });
    const service = await kc.makeApiClient(k8s.CoreV1Api).readNamespacedService({ namespace, name: "cart-api-rk2" });
    expect(service.spec?.ports?.map((p) => p.port)).toEqual([80]);
    // cart's own fork keeps its baseline's MODE: the delete was orders'.
    const cartFork = await kc.makeApiClient(k8s.AppsV1Api).readNamespacedDeployment({ namespace, name: "cart-rk2" });
    expect(cartFork.spec!.template.spec!.containers[0]!.env).toContainEqual({ name: "MODE", value: "baseline" });
  });

  it("fails ServiceNotFound, naming the env var and the workload, when the fork read has no Service, and writes nothing", async () => {
    const writesBefore = writes(sim);
    const first = await reconcile("sb-noservice", "rk3", [
      pb.Fork.fromPartial({ forkOf: forkOf("orders"), customizations: { env: [fromFork("WORKER", "worker", "{{ .Service.Host }}")] } }),
      pb.Fork.fromPartial({ forkOf: forkOf("worker") }),
    ]);
    expect(first.type).toBe("ephemera.forks.failed.v1");
    expect((first.data as { failure: pb.ForkFailure }).failure).toEqual({
      fork: `Deployment ${namespace}/orders`, reason: "ServiceNotFound",
      message: `env WORKER reads valueFrom.fork of Deployment ${namespace}/worker, but no Service in namespace ${namespace} selects the `
        + `pods of Deployment ${namespace}/worker: its fork has no Service to take .Service.Host and .Service.Port from (give the baseline `
        + "a Service, or set WORKER otherwise)",
    });
    expect(writes(sim)).toBe(writesBefore);
  });
});

/** Every create, update, patch and delete the simulator has answered. */
const writes = (sim: KubeSim) => Object.entries(sim.stats().calls)
  .filter(([k]) => /^(create|update|patch|delete) /.test(k)).reduce((n, [, v]) => n + v, 0);
