// Keeps `desiredPods` pods for each job runner group of this runner's cluster (Kubernetes
// driver): follows the jobrunnergroup events with a durable consumer, watches each group's
// pods (no polling), creates what is missing (a pod deleted by hand is replaced), deletes
// what is too many, replaces at once the pods of an earlier spec, and removes them all with
// the group. Each pod gets a capability token (scope job-agent, claims group and pod) in a
// Secret it owns. When the group's Running and ready pods change (their number or names) it
// reports them on its own aggregate `jobpods.<group>` (pods_reported), once per change.
// Its projections hold live groups only: a deleted group leaves memory, and its last report
// once it says no pod is ready (kept in the snapshot `jobpods-<cluster>`, restored at start).
// docs/jobs.md, "Pods".
import { createHash } from "node:crypto";
import * as k8s from "@kubernetes/client-node";
import type * as pb from "@ephemera/proto";
import { Aggregates, encode, ev, folding, type DomainEvent } from "@ephemera/events";
import {
  Feed, LeasedRole, Projection, execute, leaseHolderId, type Commit, type EventStore, type LeaseStore, type SnapshotStore, type Subscription,
} from "@ephemera/eventstore";
import { Backoff, KeyedLock, errorMessage, signPodCapability, type HealthSource, type Logger, type SigningKey } from "@ephemera/kit";
import { statusOf, type ApiCalls } from "../driver/kube/calls.js";
import { ObjectWatch } from "../driver/kube/watch.js";
import { GROUP_LABEL, PREFIX_LABEL, SPEC_LABEL, buildGroupPod, buildTokenSecret, groupLabels, groupPodName, specDigest } from "./pod.js";

export type GroupState = { name: string; spec?: pb.JobRunnerGroupSpec } | undefined;

export function foldGroup(state: GroupState, event: DomainEvent): GroupState {
  switch (event.type) {
    case "ephemera.jobrunnergroup.created.v1":
      return { name: event.data.name, ...(event.data.spec ? { spec: event.data.spec } : {}) };
    case "ephemera.jobrunnergroup.updated.v1":
      return state && { ...state, ...(event.data.spec ? { spec: event.data.spec } : {}) };
    case "ephemera.jobrunnergroup.deleted.v1":
      return undefined;
    default:
      return state;
  }
}

/** The last report of a group's ready pods (none yet: undefined). */
export type PodsReport = { ready: number; pods: string[] } | undefined;

export function foldPodsReport(state: PodsReport, event: DomainEvent): PodsReport {
  return event.type === "ephemera.jobrunnergroup.pods_reported.v1" ? { ready: event.data.ready, pods: [...event.data.pods] } : state;
}

/** Pure: the report of `pods` (sorted names), none when the last one says the same. */
export function decidePodsReport(state: PodsReport, pods: string[]): DomainEvent[] {
  const same = state !== undefined && state.pods.length === pods.length && state.pods.every((p, i) => p === pods[i]);
  return same ? [] : [ev("ephemera.jobrunnergroup.pods_reported.v1", { ready: pods.length, pods })];
}

/** Running, not going away, and its Ready condition true. */
export const podReady = (p: k8s.V1Pod) => p.status?.phase === "Running" && !p.metadata?.deletionTimestamp
  && !!p.status.conditions?.some((c) => c.type === "Ready" && c.status === "True");

export interface GroupPodsOptions {
  store: EventStore;
  kubeconfig: k8s.KubeConfig;
  calls: ApiCalls;
  /** The cluster this runner serves: only its groups get pods. */
  clusterName: string;
  prefix: string;
  agentImage: string;
  /** host:port of the JobAgent service as pods reach it (EPHEMERA_POD_JOBS). */
  podJobs: string;
  signingKey: SigningKey;
  /** How long a pod's token is valid (default 30 days). */
  tokenTtlMs?: number;
  logger: Logger;
  /** Where the replicas of the cluster's runner hold this reconciler's lease; absent: this process is the only one. */
  leases?: LeaseStore;
  /** How long the lease lasts unless renewed (default 10 s). */
  leaseTtlMs?: number;
  /** Where the projections' snapshot `jobpods-<cluster>` is kept; absent: every start replays the stream. */
  snapshots?: { store: SnapshotStore; fingerprint: string };
}

const DEFAULT_TOKEN_TTL_MS = 30 * 24 * 3600_000;
const SYNC_TIMEOUT_MS = 30_000;
const RETRY = { firstMs: 1000, maxMs: 30_000 };

interface Watched {
  watch: ObjectWatch<k8s.V1Pod>;
  stopListening: () => void;
  /** Pods created and not yet seen by the watch: they count already. */
  created: Set<string>;
  /** Pods the watch said were deleted (its cache may still hold them while it tells). */
  gone: Set<string>;
}

export class GroupPods {
  /** A deleted group (undefined) leaves memory; a later one of the same name folds from nothing, as on a new group. */
  readonly groups = new Projection<GroupState>(Aggregates.jobrunnergroup, () => undefined, folding(foldGroup), { retired: (s) => s === undefined });
  /** What was reported of each group's ready pods (by this runner or another of the cluster). */
  readonly reports = new Projection<PodsReport>(Aggregates.jobpods, () => undefined, folding(foldPodsReport));
  private readonly feed: Feed;
  private readonly core: k8s.CoreV1Api;
  private readonly watched = new Map<string, Watched>();
  private readonly locks = new KeyedLock();
  private readonly failures = new Map<string, Backoff>();
  private subscription?: Subscription;
  private stopped = false;
  /** One runner of the cluster keeps the groups' pods: the holder of the lease `jobpods-<cluster>`. */
  private readonly role: LeasedRole;

  constructor(private readonly o: GroupPodsOptions) {
    const cluster = o.clusterName.replace(/[^A-Za-z0-9_-]/g, "_");
    this.feed = new Feed(o.store, [this.groups, this.reports], o.logger, o.snapshots && { ...o.snapshots, name: `jobpods-${cluster}` });
    this.feed.onCommit((c) => this.retireReport(c));
    this.core = o.kubeconfig.makeApiClient(k8s.CoreV1Api);
    this.role = new LeasedRole(o.leases, {
      name: `jobpods-${cluster}`, holder: leaseHolderId("runner"), ttlMs: o.leaseTtlMs ?? 10_000, logger: o.logger,
    }, { begin: () => this.begin(), end: () => this.end() });
  }

  /** Whether this replica keeps the cluster's group pods now (holds the lease). */
  get reconciling(): boolean {
    return this.role.active;
  }

  /** Unhealthy for good once a projection cannot fold an event. */
  get health(): HealthSource {
    return this.feed;
  }

  async start(): Promise<void> {
    await this.feed.start();
    await this.role.start();
  }

  private async begin(): Promise<void> {
    for (const [name] of this.groups.entries()) this.schedule(name);
    const durable = `jobpods-${this.o.clusterName.replace(/[^A-Za-z0-9_-]/g, "_")}`;
    this.subscription = this.o.store.subscribe(
      { durable, aggregate: Aggregates.jobrunnergroup, from: this.feed.position, redelivery: { maxDeliver: Infinity, backoffMs: [250, 1000, 2000, 5000, 10_000] } },
      async (c) => {
        await this.feed.waitFor(c.position);
        await this.reconcile(c.aggregateId);
      },
    );
  }

  /** Another replica keeps the pods from now on: stop reading and watching (the pods stay; it finds them when it begins). */
  private async end(): Promise<void> {
    const subscription = this.subscription;
    this.subscription = undefined;
    await subscription?.stop();
    await this.unwatchAll();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.role.stop();
    await this.feed.stop();
    await this.unwatchAll();
  }

  /**
   * After the feed applied `c`: the report of a group that is gone leaves memory once it says
   * no pod is ready (its pods are removed with the group, then reported). A report this
   * replica wrote past the feed's position waits for the feed to reach it, so a restored
   * snapshot holds what a replay does.
   */
  private retireReport(c: Commit): void {
    if (c.aggregate !== Aggregates.jobrunnergroup && c.aggregate !== Aggregates.jobpods) return;
    const group = c.aggregateId;
    const report = this.reports.get(group);
    if (this.groups.get(group) || !report || report.revision > c.position || (report.state?.pods.length ?? 0) > 0) return;
    this.reports.retire(group);
  }

  private async unwatchAll(): Promise<void> {
    for (const w of this.watched.values()) {
      w.stopListening();
      await w.watch.stop();
    }
    this.watched.clear();
  }

  /** Reconciles a group now, and again with backoff while that fails (the cluster unreachable). */
  private schedule(name: string): void {
    if (this.stopped || !this.role.active) return;
    this.reconcile(name).then(
      () => this.failures.delete(name),
      (err: unknown) => {
        let backoff = this.failures.get(name);
        if (!backoff) this.failures.set(name, (backoff = new Backoff(RETRY)));
        const delayMs = backoff.next();
        this.o.logger.warn({ group: name, err: errorMessage(err), retryInMs: delayMs }, "the group's pods not reconciled; trying again");
        setTimeout(() => this.schedule(name), delayMs).unref();
      },
    );
  }

  /** Brings one group's pods to its spec (none when it is deleted or on another cluster); once at a time per group. */
  private reconcile(name: string): Promise<void> {
    return this.locks.run([name], async () => {
      if (this.stopped || !this.role.active) return;
      const state = this.groups.get(name)?.state;
      const spec = state?.spec?.cluster === this.o.clusterName ? state.spec : undefined;
      let w = this.watched.get(name);
      if (w && (!spec || w.watch.namespace !== spec.namespace)) {
        await this.removeAll(name, w);
        w = undefined;
      }
      if (!spec) return;
      w ??= await this.watch(name, spec.namespace);
      await this.bringToCount(name, spec, w);
      this.reportSoon(name);
    });
  }

  /** Reports the group's ready pods as the watch sees them now (none once it is not watched); failures are logged, the next change reports again. */
  private reportSoon(group: string): void {
    if (this.stopped) return;
    this.locks.run([`report:${group}`], async () => {
      if (this.stopped) return;
      const w = this.watched.get(group);
      const pods = (w?.watch.all() ?? []).filter((p) => podReady(p) && !w!.gone.has(p.metadata!.name!)).map((p) => p.metadata!.name!).sort();
      // Deterministic: two runners of the cluster reporting the same pods on the same version make one commit.
      const digest = createHash("sha256").update(pods.join(",")).digest("hex").slice(0, 16);
      const { appended } = await execute(this.o.store, this.reports, group, (state) => decidePodsReport(state, pods).map(encode), {
        source: "runner", command: `pods-reported:${digest}`,
      });
      if (appended) this.o.logger.info({ group, ready: pods.length }, "job runner group's ready pods reported");
    }).catch((err: unknown) => this.o.logger.warn({ group, err: errorMessage(err) }, "the group's ready pods not reported"));
  }

  private async bringToCount(group: string, spec: pb.JobRunnerGroupSpec, w: Watched): Promise<void> {
    const digest = specDigest(spec);
    const cached = w.watch.all();
    for (const name of w.gone) if (!cached.some((p) => p.metadata?.name === name)) w.gone.delete(name);
    const live = cached.filter((p) => !p.metadata?.deletionTimestamp && !w.gone.has(p.metadata!.name!));
    for (const p of live) w.created.delete(p.metadata!.name!);
    // Ended for good (restartPolicy Always makes that rare) or built from an earlier spec: replaced.
    const stale = live.filter((p) => p.metadata?.labels?.[SPEC_LABEL] !== digest || p.status?.phase === "Failed" || p.status?.phase === "Succeeded");
    const current = [...live.filter((p) => !stale.includes(p)).map((p) => p.metadata!.name!), ...w.created];
    const wanted = spec.scaling?.manual?.desiredPods ?? 0;
    const extra = current.slice(wanted);
    for (const pod of [...stale.map((p) => p.metadata!.name!), ...extra]) await this.deletePod(spec.namespace, pod, w);
    for (let n = current.length; n < wanted; n++) await this.createPod(group, spec, w);
    if (stale.length || extra.length || current.length < wanted) {
      this.o.logger.info({ group, desiredPods: wanted, created: Math.max(0, wanted - current.length), deleted: stale.length + extra.length }, "job runner group's pods reconciled");
    }
  }

  private async createPod(group: string, spec: pb.JobRunnerGroupSpec, w: Watched): Promise<void> {
    const pod = groupPodName(group);
    const request = { group, spec, pod, prefix: this.o.prefix, agentImage: this.o.agentImage, podJobs: this.o.podJobs };
    const body = buildGroupPod(request) as k8s.V1Pod;
    w.created.add(pod);
    let created: k8s.V1Pod;
    try {
      created = await this.o.calls.count("create", "pods", () => this.core.createNamespacedPod({ namespace: spec.namespace, body }));
    } catch (err) {
      w.created.delete(pod);
      throw err;
    }
    const token = await signPodCapability(this.o.signingKey, { group, pod }, this.o.tokenTtlMs ?? DEFAULT_TOKEN_TTL_MS);
    const secret = buildTokenSecret({ ...request, token, podUid: created.metadata?.uid ?? "" }) as k8s.V1Secret;
    await this.o.calls.count("create", "secrets", () => this.core.createNamespacedSecret({ namespace: spec.namespace, body: secret }));
  }

  private async deletePod(namespace: string, pod: string, w: Watched): Promise<void> {
    w.created.delete(pod);
    const removals: Array<[string, () => Promise<unknown>]> = [
      ["pods", () => this.core.deleteNamespacedPod({ name: pod, namespace })],
      ["secrets", () => this.core.deleteNamespacedSecret({ name: pod, namespace })],
    ];
    for (const [resource, remove] of removals) {
      await this.o.calls.count("delete", resource, remove).catch((err: unknown) => {
        if (statusOf(err) !== 404) throw err;
      });
    }
  }

  /** Every pod and token Secret of the group in the watch's namespace, and the watch. */
  private async removeAll(group: string, w: Watched): Promise<void> {
    const namespace = w.watch.namespace;
    const labelSelector = selector(this.o.prefix, group);
    // The token Secrets are named after their pods (the runner never reads Secrets back).
    const pods = await this.o.calls.count("list", "pods", () => this.core.listNamespacedPod({ namespace, labelSelector }));
    for (const pod of pods.items) await this.deletePod(namespace, pod.metadata!.name!, w);
    w.stopListening();
    await w.watch.stop();
    this.watched.delete(group);
    this.reportSoon(group);
    this.o.logger.info({ group, namespace, removed: pods.items.length }, "job runner group's pods removed");
  }

  private async watch(group: string, namespace: string): Promise<Watched> {
    const labelSelector = selector(this.o.prefix, group);
    const watch = new ObjectWatch<k8s.V1Pod>(this.o.kubeconfig, {
      namespace, path: `/api/v1/namespaces/${namespace}/pods`, resource: "pods", labelSelector, what: `pods of job runner group ${group}`,
      list: () => this.core.listNamespacedPod({ namespace, labelSelector }),
    }, this.o.calls, this.o.logger);
    // A pod going (deleted by hand, evicted: as soon as it is terminating) or ended: the count is made up again.
    // eslint-disable-next-line prefer-const -- the listener reads it once it is set below
    let w: Watched;
    const stopListening = watch.subscribe((e) => {
      // Seen: the watch counts it from now on (and no longer once deleted).
      w.created.delete(e.object.metadata!.name!);
      if (e.type === "delete") {
        w.gone.add(e.object.metadata!.name!);
        // Its token goes with it (a cluster's garbage collector would too: the Secret is owned by the pod).
        this.o.calls.count("delete", "secrets", () => this.core.deleteNamespacedSecret({ name: e.object.metadata!.name!, namespace }))
          .catch((err: unknown) => {
            if (statusOf(err) !== 404) this.o.logger.warn({ group, pod: e.object.metadata?.name, err: errorMessage(err) }, "the token Secret of a deleted pod could not be deleted");
          });
      }
      this.reportSoon(group);
      const phase = e.object.status?.phase;
      if (e.type === "delete" || e.object.metadata?.deletionTimestamp || phase === "Failed" || phase === "Succeeded") this.schedule(group);
    });
    w = { watch, stopListening, created: new Set(), gone: new Set() };
    this.watched.set(group, w);
    await watch.synced(SYNC_TIMEOUT_MS);
    return w;
  }
}

const selector = (prefix: string, group: string) =>
  Object.entries(groupLabels(prefix, group)).map(([k, v]) => `${k}=${v}`).join(",");

export { GROUP_LABEL, PREFIX_LABEL };
