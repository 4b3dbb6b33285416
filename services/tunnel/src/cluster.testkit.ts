// A cluster for the tunnel's tests to see: kube-sim in this process, its Services listed by
// the tunnel's own lister (kubeServices) through kube-sim's kubeconfig. Under kube-sim's
// docker runtime its cluster DNS answers this machine too, so the tunnel's dial reaches a
// Service by name: a headless Service without a selector whose Endpoints a test writes
// (127.0.0.1, say) is resolved by that DNS to the address the test chose.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { startKubeSim, type KubeSim, type RuntimeName } from "@ephemera/kube-sim";
import { kubeServices, type ListServices } from "./server/services.js";

export interface Cluster {
  sim: KubeSim;
  /** The cluster DNS's address (port 53) for the tunnel's `dns`; only under the docker runtime. */
  dns: string[];
  /** The tunnel's lister of these namespaces' Services (all when none), over kube-sim's kubeconfig. */
  listServices(namespaces?: string[]): ListServices;
  /** A namespace of its own, named `<prefix>-<pid>-<n>`. */
  namespace(prefix: string): Promise<string>;
  /**
   * A Service on `ports` without a selector. With `endpoint`, it is headless and its Endpoints
   * are that IP on the same ports, so the cluster DNS names `endpoint` for it.
   */
  service(namespace: string, name: string, ports: number[], endpoint?: string): Promise<void>;
  stop(): Promise<void>;
}

let counter = 0;

export async function startCluster(runtime: RuntimeName): Promise<Cluster> {
  const dir = mkdtempSync(join(tmpdir(), "tunnel-kube-sim-"));
  const sim = await startKubeSim({ listen: "127.0.0.1:0", runtime, kubeconfigPath: join(dir, "kubeconfig") });
  const kc = new KubeConfig();
  kc.loadFromFile(sim.kubeconfigPath);
  const core = kc.makeApiClient(CoreV1Api);
  return {
    sim,
    dns: sim.dnsServer ? [sim.dnsServer] : [],
    listServices: (namespaces = []) => kubeServices(kc, namespaces),
    async namespace(prefix) {
      const name = `${prefix}-${process.pid}-${++counter}`;
      await core.createNamespace({ body: { metadata: { name } } });
      return name;
    },
    async service(namespace, name, ports, endpoint) {
      const servicePorts = ports.map((port) => ({ name: `p${port}`, port }));
      await core.createNamespacedService({ namespace, body: {
        metadata: { name }, spec: { ports: servicePorts, ...(endpoint ? { clusterIP: "None" } : {}) },
      } });
      if (!endpoint) return;
      await core.createNamespacedEndpoints({ namespace, body: {
        metadata: { name }, subsets: [{ addresses: [{ ip: endpoint }], ports: servicePorts }],
      } });
    },
    async stop() {
      await sim.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
