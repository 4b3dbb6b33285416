// The forks of a sandbox on a Kubernetes cluster: each baseline read, its fork built
// (forks/build.ts) and written with a Service per baseline Service and the outputs Secret
// its env reads; what an earlier generation placed and this one no longer has is deleted
// (found by the routing key's label, so nothing a crashed runner wrote is left behind).
// With EPHEMERA_ROUTING_MESH=istio, the VirtualServices of the baseline Services follow
// (mesh.ts). Availability is followed with one shared watch per namespace and kind, no polling.
// A connected local workload gets, for each baseline Service, a Service without a selector
// and Endpoints pointing at the tunnel (local-build.ts), swept apart from the forks' objects.
import * as k8s from "@kubernetes/client-node";
import * as pb from "@ephemera/proto";
import {
  FORK_KINDS, ValidationError, baselineLabel, baselineOf, errorMessage, isForkKind, servicesSelecting, type BaselineRef, type ForkKind,
  type Logger, type ServiceLike,
} from "@ephemera/kit";
import type { RoutingMesh } from "../config.js";
import { retryableApiError, statusOf, type ApiCalls } from "../driver/kube/calls.js";
import { ObjectWatch } from "../driver/kube/watch.js";
import { ForkValueError, buildFork, buildForkService, buildOutputsSecrets, forkServiceOf, isOutputsTooLargeError } from "./build.js";
import { IstioRoutes, isMeshNotInstalledError, type ServiceRef } from "./mesh.js";
import { OutputMissingError } from "./outputs.js";
import type { ApplyResult, ForkCluster } from "./reconciler.js";
import type { ForkDesire } from "./state.js";
import { LOCAL_LABEL, ROUTING_KEY_LABEL, buildLocalObjects } from "./local-build.js";
import type { LocalDesire, ServedLocal } from "./local-state.js";

type Obj = k8s.KubernetesObject & { spec?: Record<string, unknown>; status?: Record<string, unknown>; [key: string]: unknown };

/** The kinds a fork may copy (the spec's FORK_KINDS), with where the API keeps them. */
export const WORKLOAD_KINDS: Record<ForkKind, { apiVersion: string; plural: string }> = {
  Deployment: { apiVersion: "apps/v1", plural: "deployments" },
  StatefulSet: { apiVersion: "apps/v1", plural: "statefulsets" },
  Rollout: { apiVersion: "argoproj.io/v1alpha1", plural: "rollouts" },
};
const OTHER_KINDS: Record<string, { apiVersion: string; plural: string }> = {
  Service: { apiVersion: "v1", plural: "services" },
  Secret: { apiVersion: "v1", plural: "secrets" },
  Endpoints: { apiVersion: "v1", plural: "endpoints" },
};
const kindOf = (kind: string) => (isForkKind(kind) ? WORKLOAD_KINDS[kind] : OTHER_KINDS[kind]!);
const collectionPath = (kind: string, namespace: string) => {
  const { apiVersion, plural } = kindOf(kind);
  return `${apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`}/namespaces/${namespace}/${plural}`;
};

/** How long the first list of a new watch may take before the wait gives up (and is tried again). */
const SYNC_TIMEOUT_MS = 30_000;

export interface KubeForkClusterOptions {
  kubeconfig: k8s.KubeConfig;
  calls: ApiCalls;
  logger: Logger;
  /** The resource outputs the forks read, keyed as the outputs Secret keys them. */
  outputs: (desire: ForkDesire, forks: pb.Fork[]) => Promise<Map<string, Buffer>>;
  /** EPHEMERA_ROUTING_MESH: with istio, each baseline Service with forks gets a VirtualService routing to them. */
  mesh?: RoutingMesh;
}


class Refused extends Error {
  constructor(readonly failure: pb.ForkFailure) {
    super(failure.message);
  }
}

export class KubeForkCluster implements ForkCluster {
  private readonly api: k8s.KubernetesObjectApi;
  private readonly istio?: IstioRoutes;
  private readonly watches = new Map<string, Promise<ObjectWatch<Obj>>>();
  /** The generation each workload was last written at: a watch's cache older than that is not its state yet. */
  private readonly written = new Map<string, number>();
  private readonly key = (kind: string, namespace: string, name: string) => `${kind}/${namespace}/${name}`;

  constructor(private readonly o: KubeForkClusterOptions) {
    this.api = k8s.KubernetesObjectApi.makeApiClient(o.kubeconfig);
    if (o.mesh === "istio") this.istio = new IstioRoutes({ api: this.api, calls: o.calls, logger: o.logger });
  }

  async apply(d: ForkDesire, wanted: pb.Fork[]): Promise<ApplyResult> {
    try {
      return { kind: "applied", forks: await this.write(d, wanted) };
    } catch (err) {
      if (err instanceof Refused) return { kind: "failed", failure: err.failure };
      if (err instanceof OutputMissingError) return { kind: "failed", failure: { fork: "", reason: "OutputMissing", message: err.message } };
      if (isOutputsTooLargeError(err)) return { kind: "failed", failure: { fork: "", reason: "OutputsTooLarge", message: err.message } };
      if (isMeshNotInstalledError(err)) return { kind: "failed", failure: { fork: "", reason: "Rejected", message: err.message } };
      // Refused by the API server (forbidden, invalid): trying again would not help.
      if (statusOf(err) !== undefined && !retryableApiError(err) && statusOf(err) !== 409) {
        return { kind: "failed", failure: { fork: "", reason: "Rejected", message: `the cluster refused: ${apiMessage(err)}` } };
      }
      throw err;
    }
  }

  private async write(d: ForkDesire, wanted: pb.Fork[]): Promise<pb.ForkPlacement[]> {
    const sandbox = { name: d.sandbox, routingKey: d.routingKey };
    const values = wanted.length ? await this.o.outputs(d, wanted) : new Map<string, Buffer>();
    // The Secrets first, before any read of the baselines: outputs too large for one fail the apply with nothing written.
    const secrets = buildOutputsSecrets(sandbox, wanted, values) as unknown as Obj[];
    const placements: pb.ForkPlacement[] = [];
    const objects: Obj[] = [];
    const baselineServices: ServiceRef[] = [];
    // Every baseline and its Services first: a fork's env may read another fork's Service (valueFrom.fork).
    const read: Array<{ fork: pb.Fork; baseline: BaselineRef; base: Obj; selecting: Obj[] }> = [];
    for (const fork of wanted) {
      const baseline = baselineOf(fork.forkOf);
      const base = await this.baseline(d, baseline);
      read.push({ fork, baseline, base, selecting: await this.servicesSelecting(base, baseline.namespace) });
    }
    const serviceOf = (r: (typeof read)[number]) => forkServiceOf(r.baseline, r.selecting as never, d.routingKey);
    const forkServices = new Map(read.map((r) => [baselineLabel(r.baseline), serviceOf(r)]));
    for (const { fork, baseline, base, selecting } of read) {
      const label = baselineLabel(baseline);
      let workload: Obj;
      try {
        workload = buildFork({ sandbox, fork, baseline: base as never, forkServices }) as unknown as Obj;
      } catch (err) {
        if (err instanceof ForkValueError) throw new Refused({ fork: label, reason: err.reason, message: err.message });
        if (!(err instanceof ValidationError)) throw err;
        throw new Refused({ fork: label, reason: "PatchFailed", message: err.violations.map((v) => v.description).join("; ") });
      }
      const services = selecting.map((s) => buildForkService(s as never, workload as never, d.routingKey) as unknown as Obj);
      objects.push(workload, ...services);
      baselineServices.push(...selecting.map((s) => ({ namespace: baseline.namespace, name: s.metadata!.name! })));
      placements.push({
        fork: label, baseline,
        workload: { kind: baseline.kind, namespace: baseline.namespace, name: workload.metadata!.name! },
        services: services.map((s, i) => ({
          host: `${s.metadata!.name}.${baseline.namespace}.svc`,
          ports: ((s.spec?.["ports"] ?? []) as Array<{ port: number }>).map((p) => p.port),
          baselineHost: `${selecting[i]!.metadata!.name}.${baseline.namespace}.svc`,
        })),
      });
    }
    // The Secrets first: the forks' env refers to them.
    for (const obj of [...secrets, ...objects]) await this.upsert(obj);
    // Everywhere any generation may have written something (this one, and a failed or interrupted apply, included).
    const touched = d.touched.map((t) => t.split("/") as [string, string]);
    const namespaces = new Set(touched.map(([, ns]) => ns));
    await this.sweep(d.routingKey, [...secrets, ...objects], namespaces, new Set(touched.map(([kind]) => kind)));
    // The mesh's routes last: they name the fork Services, which exist (or are gone) by now.
    await this.istio?.sync(namespaces, baselineServices);
    return placements;
  }

  private async baseline(d: ForkDesire, b: BaselineRef): Promise<Obj> {
    const label = baselineLabel(b);
    // The spec's validation refuses such a kind (fork-kind): this is for a fork that got past it.
    if (!isForkKind(b.kind)) {
      throw new Refused({ fork: label, reason: "Rejected", message: `kind ${b.kind} cannot be forked (${FORK_KINDS.join(", ")})` });
    }
    const kind = WORKLOAD_KINDS[b.kind];
    try {
      return await this.o.calls.count("get", kind.plural, () => this.api.read<Obj>({ apiVersion: kind.apiVersion, kind: b.kind, metadata: { name: b.name, namespace: b.namespace } }));
    } catch (err) {
      if (statusOf(err) === 404) throw new Refused({ fork: label, reason: "BaselineNotFound", message: `baseline ${label} not found on cluster ${d.cluster}` });
      throw err;
    }
  }

  /** The baseline's namespace's Services whose selector picks the baseline's pods. */
  private async servicesSelecting(baseline: Obj, namespace: string): Promise<Obj[]> {
    const template = (baseline.spec?.["template"] ?? {}) as { metadata?: { labels?: Record<string, string> } };
    const labels = template.metadata?.labels ?? {};
    const list = await this.o.calls.count("list", "services", () => this.api.list<Obj>("v1", "Service", namespace));
    return servicesSelecting(list.items as Array<Obj & ServiceLike>, labels);
  }

  /** Creates the object, or replaces it as it stands (its resourceVersion, and a Service's cluster IP, kept). */
  private async upsert(obj: Obj): Promise<void> {
    const { plural } = kindOf(obj.kind!);
    const key = this.key(obj.kind!, obj.metadata!.namespace!, obj.metadata!.name!);
    const wrote = (stored: Obj) => { if (isForkKind(obj.kind!)) this.written.set(key, Number(stored.metadata?.generation ?? 0)); };
    try {
      wrote(await this.o.calls.count("create", plural, () => this.api.create(obj)));
      return;
    } catch (err) {
      if (statusOf(err) !== 409) throw err;
    }
    const current = await this.o.calls.count("get", plural, () => this.api.read<Obj>({ apiVersion: obj.apiVersion!, kind: obj.kind!, metadata: { name: obj.metadata!.name!, namespace: obj.metadata!.namespace! } }));
    const next: Obj = { ...obj, metadata: { ...obj.metadata, resourceVersion: current.metadata?.resourceVersion } };
    if (obj.kind === "Service") {
      const ip = current.spec?.["clusterIP"];
      next.spec = { ...next.spec, ...(ip ? { clusterIP: ip, clusterIPs: current.spec?.["clusterIPs"] ?? [ip] } : {}) };
    }
    wrote(await this.o.calls.count("update", plural, () => this.api.replace(next)));
  }

  /** Deletes what carries the routing key's label in these namespaces and is not kept. */
  private async sweep(routingKey: string, keep: Obj[], namespaces: Set<string>, workloadKinds: Set<string>): Promise<void> {
    const kept = new Set(keep.map((o) => this.key(o.kind!, o.metadata!.namespace!, o.metadata!.name!)));
    const kinds = [...[...workloadKinds].filter(isForkKind), "Service", "Secret"];
    for (const namespace of namespaces) {
      for (const kind of kinds) {
        const { apiVersion, plural } = kindOf(kind);
        const list = await this.o.calls.count("list", plural, () =>
          this.api.list<Obj>(apiVersion, kind, namespace, undefined, undefined, undefined, undefined, `ephemera.dev/routing-key=${routingKey}`));
        for (const item of list.items) {
          const key = this.key(kind, namespace, item.metadata!.name!);
          // A local workload's Services are kept by applyLocals, not by the forks' generations.
          if (kept.has(key) || item.metadata?.labels?.[LOCAL_LABEL]) continue;
          await this.o.calls.count("delete", plural, () => this.api.delete({ apiVersion, kind, metadata: { name: item.metadata!.name!, namespace } }, undefined, undefined, undefined, undefined, "Background"))
            .catch((err: unknown) => { if (statusOf(err) !== 404) throw err; });
          this.written.delete(key);
          this.o.logger.info({ kind, namespace, name: item.metadata?.name }, "fork object removed");
        }
      }
    }
  }

  /**
   * Writes, for each local workload served, a Service without a selector and its Endpoints
   * for every Service selecting its baseline's pods, and removes the sandbox's other local
   * objects in `d.namespaces`; the mesh's routes follow. A baseline gone from the cluster, or
   * one no Service selects, places nothing (its local gets no route) and says why in the
   * placement's `problem`. Returns where each served local is.
   */
  async applyLocals(d: LocalDesire, served: ServedLocal[]): Promise<pb.LocalPlacement[]> {
    const placements: pb.LocalPlacement[] = [];
    const objects: Obj[] = [];
    const baselineServices: ServiceRef[] = [];
    for (const { local, sessionId, addresses } of served) {
      const baseline = baselineOf(local.from);
      const base = await this.readBaseline(baseline);
      const placement = pb.LocalPlacement.fromPartial({ local: local.name, baseline, sessionId });
      if (!base) {
        this.o.logger.warn({ sandbox: d.sandbox, local: local.name, baseline: baselineLabel(baseline) }, "a local workload's baseline is not on the cluster: nothing routes to it");
        placements.push({ ...placement, problem: `baseline ${baselineLabel(baseline)} not found on cluster ${d.cluster}: no Service to route` });
        continue;
      }
      for (const s of await this.servicesSelecting(base, baseline.namespace)) {
        const built = buildLocalObjects(s, base, { sandbox: d.sandbox, routingKey: d.routingKey, local: local.name, addresses });
        if (!built) continue;
        const host = `${String((built.service["metadata"] as { name: string }).name)}.${baseline.namespace}.svc`;
        objects.push(built.service as Obj, built.endpoints as Obj);
        baselineServices.push({ namespace: baseline.namespace, name: s.metadata!.name! });
        placement.services.push({ host, ports: built.routes.map((r) => r.port), baselineHost: `${s.metadata!.name}.${baseline.namespace}.svc` });
        for (const r of built.routes) if (!placement.routes.some((x) => x.workloadPort === r.workloadPort)) placement.routes.push({ ...r, host });
      }
      if (!placement.routes.length) {
        placement.problem = `no Service in namespace ${baseline.namespace} sends a mapped port to the pods of ${baselineLabel(baseline)}: nothing to route`;
      }
      placements.push(placement);
    }
    // The Endpoints before their Service: the Service never stands without somewhere to send to.
    for (const obj of [...objects].sort((a, b) => (a.kind === b.kind ? 0 : a.kind === "Endpoints" ? -1 : 1))) await this.upsert(obj);
    const namespaces = new Set([...d.namespaces, ...served.map((x) => baselineOf(x.local.from).namespace)]);
    await this.sweepLocals(d.routingKey, objects, namespaces);
    await this.istio?.sync(namespaces, baselineServices);
    return placements;
  }

  private async readBaseline(b: BaselineRef): Promise<Obj | undefined> {
    if (!isForkKind(b.kind)) return undefined;
    const kind = WORKLOAD_KINDS[b.kind];
    return this.o.calls.count("get", kind.plural, () => this.api.read<Obj>({ apiVersion: kind.apiVersion, kind: b.kind, metadata: { name: b.name, namespace: b.namespace } }))
      .catch((err: unknown) => { if (statusOf(err) === 404) return undefined; throw err; });
  }

  /** Deletes the routing key's local Services and Endpoints in these namespaces that are not kept. */
  private async sweepLocals(routingKey: string, keep: Obj[], namespaces: Set<string>): Promise<void> {
    const kept = new Set(keep.map((o) => this.key(o.kind!, o.metadata!.namespace!, o.metadata!.name!)));
    for (const namespace of namespaces) {
      for (const kind of ["Service", "Endpoints"]) {
        const { apiVersion, plural } = kindOf(kind);
        const list = await this.o.calls.count("list", plural, () =>
          this.api.list<Obj>(apiVersion, kind, namespace, undefined, undefined, undefined, undefined, `${ROUTING_KEY_LABEL}=${routingKey},${LOCAL_LABEL}`));
        for (const item of list.items) {
          if (kept.has(this.key(kind, namespace, item.metadata!.name!))) continue;
          await this.o.calls.count("delete", plural, () => this.api.delete({ apiVersion, kind, metadata: { name: item.metadata!.name!, namespace } }))
            .catch((err: unknown) => { if (statusOf(err) !== 404) throw err; });
          this.o.logger.info({ kind, namespace, name: item.metadata?.name }, "local workload's object removed");
        }
      }
    }
  }

  async whenAvailable(placements: pb.ForkPlacement[], done: (failure?: pb.ForkFailure) => void): Promise<() => void> {
    if (!placements.length) {
      done();
      return () => undefined;
    }
    const watched = await Promise.all(placements.map(async (p) => ({ p, watch: await this.watch(p.workload!.kind, p.workload!.namespace) })));
    let over = false;
    const unsubscribe: Array<() => void> = [];
    const stop = () => { over = true; for (const u of unsubscribe) u(); };
    const check = () => {
      if (over) return;
      const states = watched.map(({ p, watch }) => {
        const obj = watch.get(p.workload!.name);
        const min = this.written.get(this.key(p.workload!.kind, p.workload!.namespace, p.workload!.name)) ?? 0;
        // The watch has not caught up with what was written: not its state yet.
        return { p, state: obj && Number(obj.metadata?.generation ?? 0) < min ? { available: false } : availability(obj) };
      });
      const stuck = states.find((s) => s.state.failed);
      if (stuck) {
        stop();
        done({ fork: stuck.p.fork, reason: "ForkUnavailable", message: stuck.state.failed! });
      } else if (states.every((s) => s.state.available)) {
        stop();
        done();
      }
    };
    for (const { watch } of watched) unsubscribe.push(watch.subscribe(check));
    check();
    return stop;
  }

  private watch(kind: string, namespace: string): Promise<ObjectWatch<Obj>> {
    const key = `${kind}/${namespace}`;
    let w = this.watches.get(key);
    if (!w) {
      const { apiVersion, plural } = kindOf(kind);
      const labelSelector = "ephemera.dev/fork";
      const watch = new ObjectWatch<Obj>(this.o.kubeconfig, {
        namespace, path: collectionPath(kind, namespace), resource: plural, labelSelector, what: `forked ${plural}`,
        list: () => this.api.list<Obj>(apiVersion, kind, namespace, undefined, undefined, undefined, undefined, labelSelector),
      }, this.o.calls, this.o.logger);
      w = watch.synced(SYNC_TIMEOUT_MS).then(() => watch, async (err: unknown) => {
        this.watches.delete(key);
        await watch.stop();
        throw new Error(`cannot watch ${plural} in ${namespace}: ${errorMessage(err)}`);
      });
      this.watches.set(key, w);
    }
    return w;
  }

  async stop(): Promise<void> {
    const all = await Promise.allSettled(this.watches.values());
    for (const r of all) if (r.status === "fulfilled") await r.value.stop();
  }
}

/**
 * Whether a workload has rolled out its current generation and is available; failed when
 * its controller gave up (a Deployment past its progress deadline, a degraded Rollout).
 */
export function availability(obj: Obj | undefined): { available: boolean; failed?: string } {
  if (!obj) return { available: false };
  const status = (obj.status ?? {}) as {
    observedGeneration?: number | string; replicas?: number; updatedReplicas?: number; availableReplicas?: number; readyReplicas?: number; phase?: string;
    conditions?: Array<{ type: string; status: string; reason?: string; message?: string }>;
  };
  // What the controller says of an older generation is not this one's state.
  if (Number(status.observedGeneration ?? 0) < Number(obj.metadata?.generation ?? 0)) return { available: false };
  const name = `${obj.kind} ${obj.metadata?.namespace}/${obj.metadata?.name}`;
  const progressing = status.conditions?.find((c) => c.type === "Progressing");
  if (progressing?.status === "False" && progressing.reason === "ProgressDeadlineExceeded") {
    return { available: false, failed: `${name} did not become available: ${progressing.message ?? progressing.reason}` };
  }
  if (obj.kind === "Rollout" && status.phase === "Degraded") return { available: false, failed: `${name} is Degraded` };
  if (obj.kind === "Rollout" && status.phase) return { available: status.phase === "Healthy" };
  const replicas = Number((obj.spec?.["replicas"] as number | undefined) ?? 1);
  return { available: (status.updatedReplicas ?? 0) >= replicas && (status.availableReplicas ?? status.readyReplicas ?? 0) >= replicas };
}

/** The API server's own words for a refusal (its Status message), never the request. */
function apiMessage(err: unknown): string {
  const body = (err as { body?: unknown }).body;
  try {
    const status = typeof body === "string" ? JSON.parse(body) as { message?: string } : body as { message?: string } | undefined;
    if (status?.message) return `${statusOf(err)} ${status.message}`;
  } catch {
    // Not a Status.
  }
  return `HTTP ${statusOf(err)}`;
}
