// The local workloads' reconciler: keeps on a cluster, for each local workload of its
// sandboxes that a workstation serves now, the Services without a selector and their
// Endpoints that send the sandbox's traffic to the tunnel (kube.ts applyLocals), and records
// where they are on the forks aggregate (forks.locals_applied), which the Routes API reads as
// it reads the forks' placements. A disconnect, a local dropped by an update and a deleted
// sandbox remove them; a reconnect writes them again. A durable consumer of the sandbox and
// locals events drives it; when it begins it brings every sandbox of its cluster to what it
// owes. One replica per cluster does: the holder of the lease `locals-<cluster>`. Its
// projections hold live sandboxes only: a deleted sandbox's desire, what was served on its
// routing key and its record leave memory once no local's Service of it is on the cluster
// (settledLocals); they are kept in the snapshot `locals-<cluster>`, restored at start.
import type * as pb from "@ephemera/proto";
import { Aggregates, encode, folding } from "@ephemera/events";
import {
  Feed, LeasedRole, Projection, execute, leaseHolderId, type Commit, type EventStore, type LeaseStore, type SnapshotStore, type Subscription,
} from "@ephemera/eventstore";
import { Backoff, KeyedLock, errorMessage, type HealthSource, type Logger } from "@ephemera/kit";
import {
  decideLocals, foldLocalDesire, foldLocalRecord, foldServed, noLocalDesire, noLocalRecord, noServed, servedLocals, settledLocals,
  type LocalDesire, type LocalRecord, type Served, type ServedLocal,
} from "./local-state.js";

/** What the reconciler asks of a cluster. */
export interface LocalCluster {
  /** Writes the served locals' objects, removes the sandbox's others; where each served local is. Throws what is worth another try. */
  applyLocals(d: LocalDesire, served: ServedLocal[]): Promise<pb.LocalPlacement[]>;
}

export interface LocalReconcilerDeps {
  store: EventStore;
  cluster: LocalCluster;
  clusterName: string;
  logger: Logger;
  /** Where the replicas of the cluster's runner hold the reconciler's lease; absent: this process is the only one. */
  leases?: LeaseStore;
  leaseTtlMs?: number;
  /** Where the projections' snapshot `locals-<cluster>` is kept; absent: every start replays the stream. */
  snapshots?: { store: SnapshotStore; fingerprint: string };
}

const CATCH_UP = { firstMs: 1000, maxMs: 30_000 };

export class LocalReconciler {
  readonly desires = new Projection<LocalDesire | undefined>(Aggregates.sandbox, noLocalDesire, folding(foldLocalDesire));
  readonly served = new Projection<Served>(Aggregates.locals, noServed, folding(foldServed));
  readonly records = new Projection<LocalRecord>(Aggregates.forks, noLocalRecord, folding(foldLocalRecord));
  private readonly feed: Feed;
  private subscription?: Subscription;
  private readonly locks = new KeyedLock();
  private stopped = false;
  private readonly role: LeasedRole;

  constructor(private readonly deps: LocalReconcilerDeps) {
    const cluster = deps.clusterName.replace(/[^A-Za-z0-9_-]/g, "_");
    this.feed = new Feed(deps.store, [this.desires, this.served, this.records], deps.logger, deps.snapshots && { ...deps.snapshots, name: `locals-${cluster}` });
    this.feed.onCommit((c) => this.retireSettled(c));
    this.role = new LeasedRole(deps.leases, {
      name: `locals-${cluster}`, holder: leaseHolderId("runner"), ttlMs: deps.leaseTtlMs ?? 10_000, logger: deps.logger,
    }, {
      begin: () => this.begin(),
      end: async () => { const s = this.subscription; this.subscription = undefined; await s?.stop(); },
    });
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
    for (const [name] of this.desires.entries()) await this.catchUp(name, new Backoff(CATCH_UP));
    const durable = `locals-${this.deps.clusterName.replace(/[^A-Za-z0-9_-]/g, "_")}`;
    this.subscription = this.deps.store.subscribe(
      { durable, from: this.feed.position, redelivery: { maxDeliver: Infinity, backoffMs: [250, 1000, 2000, 5000, 10_000] } },
      async (c) => {
        if (c.aggregate !== Aggregates.sandbox && c.aggregate !== Aggregates.locals) return;
        await this.feed.waitFor(c.position);
        const name = c.aggregate === Aggregates.sandbox ? c.aggregateId : this.sandboxOf(c.aggregateId);
        if (name) await this.reconcile(name);
      },
    );
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.role.stop();
    await this.feed.stop();
  }

  /** The sandbox whose current incarnation has this routing key (a key of an earlier one is ignored). */
  private sandboxOf(routingKey: string): string | undefined {
    for (const [name, { state }] of this.desires.entries()) if (state?.routingKey === routingKey) return name;
    return undefined;
  }

  /**
   * After the feed applied `c`: a deleted sandbox's desire leaves memory, with what its routing
   * key held, once settled; what a routing key of no live sandbox holds leaves at once. A
   * record this replica wrote past the feed's position waits for the feed to reach it, so a
   * restored snapshot holds what a replay does.
   */
  private retireSettled(c: Commit): void {
    let name: string | undefined = c.aggregateId;
    if (c.aggregate === Aggregates.locals || c.aggregate === Aggregates.forks) {
      name = this.sandboxOf(c.aggregateId);
      if (name === undefined) {
        this.served.retire(c.aggregateId);
        this.records.retire(c.aggregateId);
        return;
      }
    } else if (c.aggregate !== Aggregates.sandbox) return;
    const d = this.desires.get(name)?.state;
    if (!d) return;
    const record = this.records.get(d.routingKey);
    if ((record?.revision ?? 0) > c.position || !settledLocals(d, record?.state)) return;
    this.desires.retire(name);
    this.served.retire(d.routingKey);
    this.records.retire(d.routingKey);
  }

  private async catchUp(name: string, backoff: Backoff): Promise<void> {
    if (this.stopped || !this.role.active) return;
    try {
      await this.reconcile(name);
    } catch (err) {
      const delayMs = backoff.next();
      this.deps.logger.warn({ sandbox: name, err: errorMessage(err), retryInMs: delayMs }, "local workloads not reconciled; trying again");
      setTimeout(() => void this.catchUp(name, backoff), delayMs).unref();
    }
  }

  private reconcile(name: string): Promise<void> {
    return this.locks.run([`locals/${name}`], async () => {
      const d = this.desires.get(name)?.state;
      if (!d || d.cluster !== this.deps.clusterName) return;
      const record = this.records.get(d.routingKey)?.state;
      const wanted = servedLocals(d, this.served.get(d.routingKey)?.state);
      // Nothing served, nothing ever placed: nothing to write or sweep.
      if (!wanted.length && !record?.length) return;
      const placed = await this.deps.cluster.applyLocals(d, wanted);
      const { appended } = await execute(this.deps.store, this.records, d.routingKey, (state) => decideLocals(state, d.sandbox, placed).map(encode), {
        source: "runner", command: "locals-applied",
      });
      if (appended) {
        this.deps.logger.info({ sandbox: d.sandbox, routingKey: d.routingKey, locals: placed.map((p) => p.local) }, placed.length ? "local workloads' Services written" : "local workloads' Services removed");
      }
    });
  }
}
