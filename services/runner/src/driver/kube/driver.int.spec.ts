// The Kubernetes driver's tidying on the simulated API server (in this process): what an
// earlier runner left of a run already recorded goes when the driver starts.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as k8s from "@kubernetes/client-node";
import { startKubeSim, type KubeSim } from "@ephemera/kube-sim";
import { createLogger, waitFor } from "@ephemera/kit";
import { KubeDriver } from "./driver.js";
import { podName, RUN_ID_ANNOTATION } from "./pod.js";

describe("the Kubernetes driver's leftovers", () => {
  let sim: KubeSim;
  let kc: k8s.KubeConfig;
  let core: k8s.CoreV1Api;
  let driver: KubeDriver | undefined;
  beforeAll(async () => {
    sim = await startKubeSim({ listen: "127.0.0.1:0", kubeconfigPath: join(mkdtempSync(join(tmpdir(), "kube-driver-int-")), "kubeconfig") });
    kc = new k8s.KubeConfig();
    kc.loadFromFile(sim.kubeconfigPath);
    core = kc.makeApiClient(k8s.CoreV1Api);
  });
  afterEach(() => driver?.close());
  afterAll(async () => sim?.stop());

  it("deletes the pod of a recorded run that nobody follows, and its token Secret, when it starts", async () => {
    const namespace = `runs-${process.pid}`;
    const prefix = `p${process.pid}`;
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    const runId = "rk1.db.create.provision.1";
    const name = podName(runId);
    const metadata = { name, labels: { "ephemera.dev/prefix": prefix }, annotations: { [RUN_ID_ANNOTATION]: runId } };
    await core.createNamespacedSecret({ namespace, body: { metadata, stringData: { token: "t" } } });
    await core.createNamespacedPod({
      namespace, body: { metadata, spec: { restartPolicy: "Never", containers: [{ name: "main", image: "debian", command: ["sleep", "300"] }] } },
    });
    // Another run's Secret, and one of another installation: not ours to remove.
    const other = { ...metadata, name: podName("rk2.db.create.provision.1"), annotations: { [RUN_ID_ANNOTATION]: "rk2.db.create.provision.1" } };
    await core.createNamespacedSecret({ namespace, body: { metadata: other, stringData: { token: "t" } } });

    const asked: string[] = [];
    driver = new KubeDriver({
      kubeconfig: kc, namespace, prefix, agentImage: "ephemera/agent:1", podIOContext: "127.0.0.1:1", iocontext: "127.0.0.1:1",
      logger: createLogger("test", "silent"), isFinished: async (id) => { asked.push(id); return id === runId; },
    });
    await driver.start();
    const names = async () => ({
      pods: (await core.listNamespacedPod({ namespace })).items.map((p) => p.metadata?.name),
      secrets: (await core.listNamespacedSecret({ namespace })).items.map((s) => s.metadata?.name),
    });
    await waitFor(async () => (await names()).pods.length === 0, { timeoutMs: 10_000, what: "the leftover pod deleted" });
    expect(asked).toEqual([runId]);
    expect(await names()).toEqual({ pods: [], secrets: [other.name] });
  });
});
