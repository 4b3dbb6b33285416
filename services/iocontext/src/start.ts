// Composition of the IO context service: projections fed from the event stream, outputs
// in Redis, the gRPC server; and the clean-up of a sandbox's outputs once it is deleted.
import type { Redis } from "ioredis";
import * as pb from "@ephemera/proto";
import { Feed, JetStreamEventStore, type EventStore, type ValueStore } from "@ephemera/eventstore";
import { followHealth, startGrpcServer, unary, type Logger, type ServerTls, type SigningKey } from "@ephemera/kit";
import { grpcServerMetrics, type Registry } from "@ephemera/kit/metrics";
import { DropLedger, Dropper } from "./drops.js";
import type { OutputStore } from "./outputs.js";
import { RedisOutputStore } from "./outputs.redis.js";
import { RedisHealth } from "./redis-health.js";
import { IOContextHandlers } from "./service.js";
import { projections as makeProjections } from "./state.js";

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
}

/** Outputs live in Redis; a test may hand in another OutputStore (the in-memory twin). */
export type IOContextServiceDeps = { store: EventStore; logger: Logger; values: ValueStore } & ({ redis: Redis } | { outputs: OutputStore });

export interface RunningIOContext {
  port: number;
  stop(): Promise<void>;
}

export async function start(config: IOContextConfig, deps: IOContextServiceDeps): Promise<RunningIOContext> {
  const { store, logger } = deps;
  const projections = makeProjections();
  // Redis is a cache of the output journal: while it is down the IO context does not wait for it.
  const health = "redis" in deps
    ? new RedisHealth(deps.redis, { logger, ...(config.metrics ? { metrics: config.metrics } : {}) })
    : undefined;
  const outputs = "outputs" in deps ? deps.outputs : new RedisOutputStore(deps.redis, config.prefix, health);
  const feed = new Feed(store, [projections.plugins, projections.workflows, projections.sandboxes], logger);
  // A start replays the stream to know which deleted sandboxes are not dropped yet, and drops
  // only those once caught up; after that, each as it is deleted.
  const ledger = new DropLedger();
  const dropper = new Dropper({ store, values: deps.values, outputs, logger });
  let caughtUp = false;
  feed.onCommit((commit) => {
    const due = ledger.observe(commit, projections);
    if (due && caughtUp) dropper.enqueue(due);
  });
  await feed.start();
  caughtUp = true;
  for (const due of ledger.pending()) dropper.enqueue(due);

  const handlers = new IOContextHandlers({
    store, projections, outputs, values: deps.values, logger, keys: config.keys, ...(config.maxOutputBytes ? { maxOutputBytes: config.maxOutputBytes } : {}),
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
    stop: async () => {
      await server.shutdown();
      await feed.stop();
      health?.stop();
      await dropper.stop();
    },
  };
}
