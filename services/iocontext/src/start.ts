// Composition of the IO context service: projections fed from the event stream, outputs
// in Redis, the gRPC server; and the clean-up of a sandbox's outputs once it is deleted.
import type { Redis } from "ioredis";
import * as pb from "@ephemera/proto";
import { Aggregates } from "@ephemera/events";
import { Feed, JetStreamEventStore, LeasedRole, leaseHolderId, type EventStore, type LeaseStore, type SnapshotStore, type ValueStore } from "@ephemera/eventstore";
import { RecentOutputs, followHealth, startGrpcServer, unary, type Logger, type ServerTls, type SigningKey } from "@ephemera/kit";
import { grpcServerMetrics, type Registry } from "@ephemera/kit/metrics";
import { DropLedger, Dropper } from "./drops.js";
import type { OutputStore } from "./outputs.js";
import { RedisOutputStore } from "./outputs.redis.js";
import { RedisHealth } from "./redis-health.js";
import { IOContextHandlers } from "./service.js";
import { projections as makeProjections, type Projections } from "./state.js";

export interface IOContextConfig {
  /** host:port to listen on (port 0: any free port). */
  listen: string;
  prefix: string;
  maxOutputBytes?: number;
  /** Serve over TLS (EPHEMERA_TLS_CERT/KEY, and EPHEMERA_TLS_CLIENT_CA for mTLS); absent: plaintext. */
  tls?: ServerTls;
  /** Verify the runs' capability tokens: the runner's signing key (and a previous one during a rotation). */
  keys: SigningKey[];
  /** Counts and times every call (the service's registry, served by main); absent: nothing counted. */
  metrics?: Registry;
  /** The bound, in bytes, of recent runs' outputs held in memory (EPHEMERA_IOCONTEXT_RECENT_BYTES); 0: none held. */
  recentBytes?: number;
}

/** Outputs live in Redis; a test may hand in another OutputStore (the in-memory twin). */
export type IOContextServiceDeps = {
  store: EventStore;
  logger: Logger;
  values: ValueStore;
  /** Where the projections' snapshot is kept, and the code's fingerprint (codeFingerprint); absent: the stream is replayed at each start. */
  snapshots?: { store: SnapshotStore; fingerprint: string };
  /** Where the replicas hold the drops' lease (one drops at a time); absent: this process is the only one. */
  leases?: LeaseStore;
  leaseTtlMs?: number;
} & ({ redis: Redis } | { outputs: OutputStore });

/** The lease whose holder drops deleted sandboxes' outputs. */
export const DROPS_LEASE = "iocontext-drops";

export interface RunningIOContext {
  port: number;
  /** What the service holds, and where its feed began: live state only (see docs/architecture.md, Memory and persistence). */
  projections: Projections;
  feed: Feed;
  /** Recent runs' outputs held in memory; absent when recentBytes is 0. */
  recent?: RecentOutputs;
  stop(): Promise<void>;
}

export async function start(config: IOContextConfig, deps: IOContextServiceDeps): Promise<RunningIOContext> {
  const { store, logger } = deps;
  // Routing keys of the live sandboxes: the workflows of any other have ended, or soon will, and leave memory.
  const live = new Set<string>();
  const projections = makeProjections((routingKey) => live.has(routingKey));
  // Redis is a cache of the output journal: while it is down the IO context does not wait for it.
  const health = "redis" in deps
    ? new RedisHealth(deps.redis, { logger, ...(config.metrics ? { metrics: config.metrics } : {}) })
    : undefined;
  const outputs = "outputs" in deps ? deps.outputs : new RedisOutputStore(deps.redis, config.prefix, health);
  // A start restores the snapshot (or replays the stream) to know which deleted sandboxes are
  // not dropped yet, and drops only those once caught up; after that, each as it is deleted.
  // Every replica keeps the ledger; the holder of the drops' lease drops (what is pending at
  // once when it takes it).
  const ledger = new DropLedger();
  const feed = new Feed(store, [projections.plugins, projections.workflows, projections.sandboxes, ledger], logger,
    deps.snapshots && { ...deps.snapshots, name: "iocontext" });
  const dropper = new Dropper({ store, values: deps.values, outputs, logger });
  const recent = config.recentBytes === 0 ? undefined : new RecentOutputs(config.recentBytes);
  let caughtUp = false;
  const drops = new LeasedRole(deps.leases, {
    name: DROPS_LEASE, holder: leaseHolderId("iocontext"), ttlMs: deps.leaseTtlMs ?? 10_000, logger,
  }, {
    begin: async () => { for (const due of ledger.pending()) dropper.enqueue(due); },
    // A drop in hand finishes (it is idempotent); the next holder finds the rest pending.
    end: async () => undefined,
  });
  feed.onRestore(() => {
    for (const [, { state }] of projections.sandboxes.entries()) live.add(state.routingKey);
  });
  feed.onCommit((commit) => {
    const due = ledger.observe(commit, projections);
    if (due && caughtUp && drops.active) dropper.enqueue(due);
    if (commit.aggregate !== Aggregates.sandbox) return;
    const held = projections.sandboxes.get(commit.aggregateId)?.state;
    if (held) {
      live.add(held.routingKey);
      return;
    }
    const gone = projections.sandboxes.latest(commit.aggregateId)?.state.routingKey;
    if (!gone) return;
    live.delete(gone);
    recent?.forget(gone);
    for (const [id] of projections.workflows.entries()) if (id.startsWith(`${gone}.`)) projections.workflows.retire(id);
  });
  await feed.start();
  caughtUp = true;
  await drops.start();

  const handlers = new IOContextHandlers({
    store, projections, outputs, values: deps.values, logger, keys: config.keys, ...(config.maxOutputBytes ? { maxOutputBytes: config.maxOutputBytes } : {}),
    ...(recent ? { recent, live: (routingKey: string) => live.has(routingKey) } : {}),
  });
  const implementation: pb.IOContextServer = {
    getStepInputs: unary((req: pb.GetStepInputsRequest) => handlers.getStepInputs(req), logger),
    putStepOutputs: unary((req: pb.PutStepOutputsRequest) => handlers.putStepOutputs(req), logger),
    getStepOutputs: unary((req: pb.GetStepOutputsRequest) => handlers.getStepOutputs(req), logger),
  };
  const server = await startGrpcServer(config.listen, [{ definition: pb.IOContextService, implementation }], logger, {
    ...(config.tls ? { tls: config.tls } : {}), ...(config.metrics ? { interceptors: [grpcServerMetrics(config.metrics)] } : {}),
  });
  // NOT_SERVING while NATS is unreachable or a consumer is re-creating itself, and for good once a projection cannot fold an event.
  followHealth(server, store instanceof JetStreamEventStore ? [store.health, feed] : [feed]);
  return {
    port: server.port,
    projections,
    feed,
    ...(recent ? { recent } : {}),
    stop: async () => {
      await server.shutdown();
      await drops.stop();
      await feed.stop();
      health?.stop();
      await dropper.stop();
    },
  };
}
