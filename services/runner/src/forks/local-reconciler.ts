// The local workloads' reconciler: keeps on a cluster, for each local workload of its
// sandboxes that a workstation serves now, the Services without a selector and their
// Endpoints that send the sandbox's traffic to the tunnel (kube.ts applyLocals), and records
// where they are on the forks aggregate (forks.locals_applied), which the Routes API reads as
// it reads the forks' placements. A disconnect, a local dropped by an update and a deleted
// sandbox remove them; a reconnect writes them again. A durable consumer of the sandbox and
// locals events drives it; on start it brings every sandbox of its cluster to what it owes.
import type * as pb from "@ephemera/proto";
import { Aggregates, encode, folding } from "@ephemera/events";
import { Feed, Projection, execute, type EventStore, type Subscription } from "@ephemera/eventstore";
import { KeyedLock, errorMessage, type HealthSource, type Logger } from "@ephemera/kit";
import {
  decideLocals, foldLocalDesire, foldLocalRecord, foldServed, noLocalDesire, noLocalRecord, noServed, servedLocals,
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
}

const CATCH_UP_BASE_MS = 1000;
const CATCH_UP_MAX_MS = 30_000;

export class LocalReconciler {
  readonly desires = new Projection<LocalDesire | undefined>(Aggregates.sandbox, noLocalDesire, folding(foldLocalDesire));
  readonly served = new Projection<Served>(Aggregates.locals, noServed, folding(foldServed));
  readonly records = new Projection<LocalRecord>(Aggregates.forks, noLocalRecord, folding(foldLocalRecord));
  private readonly feed: Feed;
  private subscription?: Subscription;
  private readonly locks = new KeyedLock();
  private stopped = false;

  constructor(private readonly deps: LocalReconcilerDeps) {
    this.feed = new Feed(deps.store, [this.desires, this.served, this.records], deps.logger);
  }

  /** Unhealthy for good once a projection cannot fold an event. */
  get health(): HealthSource {
    return this.feed;
  }

  async start(): Promise<void> {
    await this.feed.start();
    for (const [name] of this.desires.entries()) await this.catchUp(name, 0);
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
    await this.subscription?.stop();
    await this.feed.stop();
  }

  /** The sandbox whose current incarnation has this routing key (a key of an earlier one is ignored). */
  private sandboxOf(routingKey: string): string | undefined {
    for (const [name, { state }] of this.desires.entries()) if (state?.routingKey === routingKey) return name;
    return undefined;
  }

  private async catchUp(name: string, failures: number): Promise<void> {
    if (this.stopped) return;
    try {
      await this.reconcile(name);
    } catch (err) {
      const delayMs = Math.min(CATCH_UP_MAX_MS, CATCH_UP_BASE_MS * 2 ** failures);
      this.deps.logger.warn({ sandbox: name, err: errorMessage(err), retryInMs: delayMs }, "local workloads not reconciled; trying again");
      setTimeout(() => void this.catchUp(name, failures + 1), delayMs).unref();
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
