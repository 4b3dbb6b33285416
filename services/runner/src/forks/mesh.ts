// Keeps Istio's VirtualServices (EPHEMERA_ROUTING_MESH=istio) in step with the fork Services
// on the cluster: each baseline Service that fork Services stand for gets the VirtualService
// istio.ts builds from them, rewritten when they change and deleted with the last. The fork
// Services are read back from the cluster (by their baseline-service label), so the routes
// are the union over every sandbox, and what a crashed runner left is put right next time.
import { isDeepStrictEqual } from "node:util";
import type * as k8s from "@kubernetes/client-node";
import { KeyedLock, type Logger } from "@ephemera/kit";
import { statusOf, type ApiCalls } from "../driver/kube/calls.js";
import { BASELINE_SERVICE_LABEL } from "./build.js";
import { MESH_LABEL, VIRTUAL_SERVICE, buildVirtualService, virtualServiceName } from "./istio.js";

type Obj = k8s.KubernetesObject & { spec?: Record<string, unknown> };

/** The cluster serves no VirtualService: Istio (its CRDs) is not installed. Retrying does not help. */
export class MeshNotInstalledError extends Error {
  override readonly name = "MeshNotInstalledError";
}
export const isMeshNotInstalledError = (e: unknown): e is MeshNotInstalledError => e instanceof MeshNotInstalledError;

export interface ServiceRef {
  namespace: string;
  name: string;
}

export interface IstioRoutesOptions {
  api: k8s.KubernetesObjectApi;
  calls: ApiCalls;
  logger: Logger;
  /** The cluster's DNS domain, in the routes' hosts (default cluster.local). */
  clusterDomain?: string;
}

const ROUTING_KEY_LABEL = "ephemera.dev/routing-key";
const notFound = (err: unknown) => statusOf(err) === 404;

export class IstioRoutes {
  private readonly locks = new KeyedLock();

  constructor(private readonly o: IstioRoutesOptions) {}

  /**
   * Brings to the cluster's fork Services the routes of `services`, and of every
   * VirtualService of ephemera's in `namespaces` (a removed fork's baseline is found so,
   * even after a restart). Throws what is worth another try, and MeshNotInstalledError.
   */
  async sync(namespaces: Iterable<string>, services: Iterable<ServiceRef>): Promise<void> {
    const todo = new Map<string, ServiceRef>();
    for (const s of services) todo.set(`${s.namespace}/${s.name}`, s);
    for (const namespace of new Set(namespaces)) {
      for (const vs of await this.ours(namespace)) {
        const name = vs.metadata?.labels?.[BASELINE_SERVICE_LABEL];
        if (name) todo.set(`${namespace}/${name}`, { namespace, name });
      }
    }
    for (const [key, service] of todo) await this.locks.run([key], () => this.route(service));
  }

  private async ours(namespace: string): Promise<Obj[]> {
    try {
      const list = await this.o.calls.count("list", VIRTUAL_SERVICE.plural, () =>
        this.o.api.list<Obj>(VIRTUAL_SERVICE.apiVersion, VIRTUAL_SERVICE.kind, namespace, undefined, undefined, undefined, undefined, `${MESH_LABEL}=istio`));
      return list.items;
    } catch (err) {
      // Without Istio's CRDs there is none: nothing to update or remove.
      if (notFound(err)) return [];
      throw err;
    }
  }

  /**
   * One baseline Service's VirtualService. Read before the fork Services are listed, and
   * written with the resourceVersion read: a write by another runner in between conflicts
   * (and is tried again) rather than being lost.
   */
  private async route(service: ServiceRef): Promise<void> {
    const header = { apiVersion: VIRTUAL_SERVICE.apiVersion, kind: VIRTUAL_SERVICE.kind, metadata: { name: virtualServiceName(service.name), namespace: service.namespace } };
    const current = await this.o.calls.count("get", VIRTUAL_SERVICE.plural, () => this.o.api.read<Obj>(header))
      .catch((err: unknown) => { if (notFound(err)) return undefined; throw err; });
    const forks = await this.o.calls.count("list", "services", () =>
      this.o.api.list<Obj>("v1", "Service", service.namespace, undefined, undefined, undefined, undefined, `${BASELINE_SERVICE_LABEL}=${service.name},${ROUTING_KEY_LABEL}`));
    const baseline = forks.items.length ? await this.baseline(service) : undefined;
    if (!baseline) {
      if (current) await this.remove(current);
      return;
    }
    const wanted = buildVirtualService(
      { name: service.name, namespace: service.namespace, ports: tcpPorts(baseline) },
      forks.items.map((f) => ({ routingKey: f.metadata!.labels![ROUTING_KEY_LABEL]!, service: f.metadata!.name!, ports: tcpPorts(f) })),
      this.o.clusterDomain,
    ) as Obj;
    if (current && sameRoutes(current, wanted)) return;
    try {
      if (current) {
        await this.o.calls.count("update", VIRTUAL_SERVICE.plural, () =>
          this.o.api.replace({ ...wanted, metadata: { ...wanted.metadata, resourceVersion: current.metadata?.resourceVersion } }));
      } else {
        await this.o.calls.count("create", VIRTUAL_SERVICE.plural, () => this.o.api.create(wanted));
      }
    } catch (err) {
      if (notFound(err) && !current) {
        throw new MeshNotInstalledError(`the cluster serves no ${VIRTUAL_SERVICE.apiVersion} ${VIRTUAL_SERVICE.kind} (EPHEMERA_ROUTING_MESH=istio needs Istio's CRDs installed)`, { cause: err });
      }
      throw err;
    }
    this.o.logger.info({ namespace: service.namespace, service: service.name, routes: forks.items.length }, current ? "VirtualService updated" : "VirtualService created");
  }

  /** The baseline Service; gone, it has nothing left to route. */
  private async baseline(service: ServiceRef): Promise<Obj | undefined> {
    return this.o.calls.count("get", "services", () =>
      this.o.api.read<Obj>({ apiVersion: "v1", kind: "Service", metadata: { name: service.name, namespace: service.namespace } }))
      .catch((err: unknown) => { if (notFound(err)) return undefined; throw err; });
  }

  private async remove(current: Obj): Promise<void> {
    const { name, namespace, resourceVersion } = current.metadata!;
    await this.o.calls.count("delete", VIRTUAL_SERVICE.plural, () =>
      this.o.api.delete({ apiVersion: VIRTUAL_SERVICE.apiVersion, kind: VIRTUAL_SERVICE.kind, metadata: { name: name!, namespace: namespace! } },
        undefined, undefined, undefined, undefined, undefined, { preconditions: { resourceVersion: resourceVersion! } }))
      .catch((err: unknown) => { if (!notFound(err)) throw err; });
    this.o.logger.info({ namespace, name }, "VirtualService removed with the last fork");
  }
}

const tcpPorts = (service: Obj) =>
  ((service.spec?.["ports"] ?? []) as Array<{ port: number; protocol?: string }>).filter((p) => (p.protocol ?? "TCP") === "TCP").map((p) => p.port);

/** Whether the VirtualService already routes as wanted (keys in any order, as the API server may give them back). */
const sameRoutes = (current: Obj, wanted: Obj) =>
  isDeepStrictEqual(current.spec, wanted.spec)
  && Object.entries(wanted.metadata?.labels ?? {}).every(([k, v]) => current.metadata?.labels?.[k] === v);
