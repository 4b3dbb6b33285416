// The fork reconciler: brings a cluster's forks to what each of its sandboxes asked for
// (`sandbox.forks_requested`, one generation at a time), then records what became of it
// on the runner's forks aggregate: applied (with where each fork is), then available,
// or failed, or skipped where the cluster runs no workloads. A durable consumer of the
// sandbox events drives it; when it begins it catches up with every sandbox it owes an
// answer, and waits again for forks it applied but never saw available. One replica per
// cluster reconciles: the holder of the lease `forks-<cluster>`; the others keep their
// projections and begin when it is handed over. Its projections hold live sandboxes only: a
// desire leaves memory, with its records, once its sandbox is deleted and nothing is owed
// (state.ts settled); they are kept in the snapshot `forks-<cluster>`, which a start
// restores before following the stream from its position.
import type * as pb from "@ephemera/proto";
import { Aggregates, decode, encode, folding } from "@ephemera/events";
import {
  Feed, LeasedRole, Projection, execute, leaseHolderId, type Commit, type EventStore, type LeaseStore, type SnapshotStore, type Subscription,
} from "@ephemera/eventstore";
import { Backoff, KeyedLock, errorMessage, type HealthSource, type Logger } from "@ephemera/kit";
import { behind, decideReport, foldDesire, foldRecord, noDesire, noRecord, settled, target, type ForkDesire, type ForkRecord, type ForkReport } from "./state.js";

export type ApplyResult =
  | { kind: "applied"; forks: pb.ForkPlacement[] }
  | { kind: "skipped"; message: string }
  | { kind: "failed"; failure: pb.ForkFailure };

/** What the reconciler asks of a cluster. */
export interface ForkCluster {
  /**
   * Writes the forks `wanted` (their workloads, Services and outputs Secret) and removes
   * whatever of the sandbox `wanted` no longer has (wherever `desire.touched` says any
   * generation had a fork). Throws what is worth another try.
   */
  apply(desire: ForkDesire, wanted: pb.Fork[]): Promise<ApplyResult>;
  /**
   * Calls `done` once, when every placed workload is available (or with why one never will
   * be); answers a cancel.
   */
  whenAvailable(placements: pb.ForkPlacement[], done: (failure?: pb.ForkFailure) => void): Promise<() => void>;
  stop(): Promise<void>;
}

export interface ForkReconcilerDeps {
  store: EventStore;
  cluster: ForkCluster;
  /** The cluster this runner serves: only its sandboxes' forks are reconciled. */
  clusterName: string;
  logger: Logger;
  /** Where the replicas of the cluster's runner hold the reconciler's lease; absent: this process is the only one. */
  leases?: LeaseStore;
  /** How long the lease lasts unless renewed (default 10 s). */
  leaseTtlMs?: number;
  /** Where the projections' snapshot `forks-<cluster>` is kept; absent: every start replays the stream. */
  snapshots?: { store: SnapshotStore; fingerprint: string };
}

/** Retrying an available report that could not be recorded (the store is down). */
const REPORT_RETRY_MS = 1000;
/** Retrying a catch-up at start that failed: 1 s doubling to 30 s. */
const CATCH_UP = { firstMs: 1000, maxMs: 30_000 };

export class ForkReconciler {
  readonly desires = new Projection<ForkDesire | undefined>(Aggregates.sandbox, noDesire, folding(foldDesire));
  readonly records = new Projection<ForkRecord>(Aggregates.forks, noRecord, folding(foldRecord));
  readonly feed: Feed;
  private subscription?: Subscription;
  private readonly locks = new KeyedLock();
  /** Per routing key: the generation being waited on, and how to stop waiting. */
  private readonly waiting = new Map<string, { generation: number; cancel: () => void }>();
  private stopped = false;
  private readonly role: LeasedRole;

  constructor(private readonly deps: ForkReconcilerDeps) {
    const cluster = deps.clusterName.replace(/[^A-Za-z0-9_-]/g, "_");
    this.feed = new Feed(deps.store, [this.desires, this.records], deps.logger, deps.snapshots && { ...deps.snapshots, name: `forks-${cluster}` });
    this.feed.onCommit((c) => this.retireSettled(c));
    this.role = new LeasedRole(deps.leases, {
      name: `forks-${cluster}`, holder: leaseHolderId("runner"), ttlMs: deps.leaseTtlMs ?? 10_000, logger: deps.logger,
    }, { begin: () => this.begin(), end: () => this.end() });
  }

  /** Whether this replica reconciles the cluster's forks now (holds the lease). */
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
    for (const [name] of this.desires.entries()) await this.catchUp(name, new Backoff(CATCH_UP));
    const durable = `forks-${this.deps.clusterName.replace(/[^A-Za-z0-9_-]/g, "_")}`;
    this.subscription = this.deps.store.subscribe(
      // A cluster that cannot be reached is waited for: the same commit is tried again, with backoff, for as long as it takes.
      { durable, aggregate: Aggregates.sandbox, from: this.feed.position, redelivery: { maxDeliver: Infinity, backoffMs: [250, 1000, 2000, 5000, 10_000] } },
      async (c) => {
        await this.feed.waitFor(c.position);
        await this.reconcile(c.aggregateId);
      },
    );
  }

  /** Another replica reconciles from now on: stop reading and waiting (what it owes, it finds when it begins). */
  private async end(): Promise<void> {
    const subscription = this.subscription;
    this.subscription = undefined;
    for (const w of this.waiting.values()) w.cancel();
    this.waiting.clear();
    await subscription?.stop();
  }

  /** Reconciles a sandbox found owed when it begins; what fails (the cluster unreachable) is tried again with backoff. */
  private async catchUp(name: string, backoff: Backoff): Promise<void> {
    if (this.stopped || !this.role.active) return;
    try {
      await this.reconcile(name);
    } catch (err) {
      const delayMs = backoff.next();
      this.deps.logger.warn({ sandbox: name, err: errorMessage(err), retryInMs: delayMs }, "forks not reconciled; trying again");
      setTimeout(() => void this.catchUp(name, backoff), delayMs).unref();
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.role.stop();
    await this.feed.stop();
    await this.deps.cluster.stop();
  }

  /**
   * After the feed applied `c`: the desire it concerns leaves memory, with its records, once
   * settled; a record of a routing key no live desire has leaves at once. Decided on the
   * feed's position only: a record this replica wrote past it (applied at once by execute)
   * waits for the feed to reach it, so a restored snapshot holds what a replay does.
   */
  private retireSettled(c: Commit): void {
    const name = c.aggregate === Aggregates.sandbox ? c.aggregateId : c.aggregate === Aggregates.forks ? sandboxOf(c) : undefined;
    if (name === undefined) return;
    const d = this.desires.get(name)?.state;
    const keys = d ? [d.routingKey, ...d.earlier.map((e) => e.routingKey)] : [];
    if (c.aggregate === Aggregates.forks && !keys.includes(c.aggregateId)) this.records.retire(c.aggregateId);
    if (!d?.deleted || keys.some((k) => (this.records.get(k)?.revision ?? 0) > c.position)) return;
    if (!settled(d, (k) => this.records.getOrEmpty(k).state)) return;
    this.desires.retire(name);
    for (const k of keys) this.records.retire(k);
  }

  /**
   * Brings one sandbox's forks to the generation it asked for last, and removes what an
   * earlier sandbox of the same name left (once at a time per name).
   */
  private reconcile(name: string): Promise<void> {
    return this.locks.run([name], async () => {
      const d = this.desires.get(name)?.state;
      if (!d) return;
      for (const one of [...d.earlier, d]) await this.reconcileOne(one);
    });
  }

  private async reconcileOne(d: ForkDesire): Promise<void> {
    if (d.cluster !== this.deps.clusterName) return;
    const record = this.records.getOrEmpty(d.routingKey).state;
    if (!behind(d, record)) return;
    const { generation, forks } = target(d);
    if (record.applied?.generation === generation) {
      // Applied before a restart, never seen available: wait again.
      await this.awaitAvailable(d, generation, record.applied.forks);
      return;
    }
    const log = this.deps.logger.child({ sandbox: d.sandbox, routingKey: d.routingKey, generation, forks: forks.length });
    const result = await this.deps.cluster.apply(d, forks);
    if (result.kind !== "applied") {
      await this.record(d, generation, result);
      if (result.kind === "failed") log.warn({ reason: result.failure.reason, fork: result.failure.fork }, "forks could not be applied");
      return;
    }
    await this.record(d, generation, { kind: "applied", forks: result.forks });
    log.info({ placed: result.forks.map((p) => p.workload?.name) }, forks.length ? "forks applied; waiting for them to be available" : "forks removed");
    await this.awaitAvailable(d, generation, result.forks);
  }

  private async awaitAvailable(d: ForkDesire, generation: number, placements: pb.ForkPlacement[]): Promise<void> {
    this.waiting.get(d.routingKey)?.cancel();
    let done = false;
    const current = () => {
      const now = this.desires.get(d.sandbox)?.state;
      return now?.routingKey === d.routingKey ? now : now?.earlier.find((e) => e.routingKey === d.routingKey);
    };
    const superseded = () => {
      const now = current();
      return this.stopped || !this.role.active || this.records.getOrEmpty(d.routingKey).state.reported >= generation || !now || target(now).generation !== generation;
    };
    const record = (failure?: pb.ForkFailure): void => {
      if (superseded()) return;
      this.record(d, generation, failure ? { kind: "failed", failure } : { kind: "available" }).then(
        () => this.deps.logger.info({ sandbox: d.sandbox, generation, ...(failure ? { reason: failure.reason } : {}) }, failure ? "a fork did not become available" : "forks available"),
        (err: unknown) => {
          this.deps.logger.warn({ sandbox: d.sandbox, generation, err: errorMessage(err) }, "could not record what became of the forks; trying again");
          setTimeout(() => record(failure), REPORT_RETRY_MS).unref();
        },
      );
    };
    const report = (failure?: pb.ForkFailure): void => {
      if (done) return;
      done = true;
      if (this.waiting.get(d.routingKey)?.generation === generation) this.waiting.delete(d.routingKey);
      record(failure);
    };
    const stopWatching = await this.deps.cluster.whenAvailable(placements, report);
    if (done) {
      stopWatching();
      return;
    }
    this.waiting.set(d.routingKey, { generation, cancel: () => { done = true; stopWatching(); } });
  }

  private async record(d: ForkDesire, generation: number, report: ForkReport): Promise<void> {
    await execute(this.deps.store, this.records, d.routingKey, (state) => decideReport(state, d.sandbox, generation, report).map(encode), {
      source: "runner", command: `forks-${report.kind}:${generation}`,
    });
  }
}

/** The sandbox a forks commit is about (every forks event names it). */
function sandboxOf(c: Commit): string | undefined {
  for (const e of c.events) {
    const event = decode(e);
    if (event && "sandbox" in event.data && typeof event.data.sandbox === "string") return event.data.sandbox;
  }
  return undefined;
}

/** The cluster of a runner that runs no workloads (the process driver): every request is answered skipped. */
export class NoWorkloads implements ForkCluster {
  constructor(private readonly clusterName: string) {}

  async apply(): Promise<ApplyResult> {
    return {
      kind: "skipped",
      message: `cluster ${this.clusterName} runs steps as local processes (the process driver) and no workloads: forks need a runner with the Kubernetes driver`,
    };
  }

  async whenAvailable(_p: pb.ForkPlacement[], done: () => void): Promise<() => void> {
    done();
    return () => undefined;
  }

  async stop(): Promise<void> {}
}
