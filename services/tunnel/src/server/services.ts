// The cluster's Services, for a workstation to find what it may dial: listed through the
// Kubernetes API when the tunnel has a kubeconfig, else none. With namespaces named
// (EPHEMERA_TUNNEL_NAMESPACES) only theirs, each a namespace the tunnel is granted (deploy/fork-namespace).
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import type { ClusterService } from "../protocol.js";

export type ListServices = () => Promise<ClusterService[]>;

export function kubeServices(kubeconfig: KubeConfig, namespaces: string[] = [], timeoutMs = 10_000): ListServices {
  const core = kubeconfig.makeApiClient(CoreV1Api);
  return async () => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the Kubernetes API did not list Services within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      const lists = namespaces.length
        ? await Promise.race([Promise.all(namespaces.map((namespace) => core.listNamespacedService({ namespace }))), timeout])
        : [await Promise.race([core.listServiceForAllNamespaces(), timeout])];
      return lists.flatMap((l) => l.items).map((s) => ({
        namespace: s.metadata?.namespace ?? "", name: s.metadata?.name ?? "", ports: (s.spec?.ports ?? []).map((p) => p.port),
      })).sort((a, b) => a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name));
    } finally {
      clearTimeout(timer);
    }
  };
}

export const noServices: ListServices = () => Promise.resolve([]);
