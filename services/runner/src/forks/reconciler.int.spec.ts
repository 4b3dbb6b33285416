// The fork reconciler with the Kubernetes fork cluster on the simulated API server (in this
// process) and the in-memory event store: what it records, and what it writes, when a
// sandbox's forks read more outputs than one Secret may hold.
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
    expect(deployments.items.map((d) => d.metadata?.name)).toEqual(["orders"]);
  });
});

/** Every create, update, patch and delete the simulator has answered. */
const writes = (sim: KubeSim) => Object.entries(sim.stats().calls)
  .filter(([k]) => /^(create|update|patch|delete) /.test(k)).reduce((n, [, v]) => n + v, 0);
