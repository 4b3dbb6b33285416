// Composition of the IO context service: projections fed from the event stream, outputs
// in Redis, the gRPC server; and the clean-up of a sandbox's outputs once it is deleted.
import type { Redis } from "ioredis";
import * as pb from "@ephemera/proto";
import { Aggregates } from "@ephemera/events";
import { Feed, JetStreamEventStore, type Commit, type EventStore, type ValueStore } from "@ephemera/eventstore";
import { UnavailableError, delay, followHealth, startGrpcServer, unary, type Logger, type ServerTls, type SigningKey } from "@ephemera/kit";
import { grpcServerMetrics, type Registry } from "@ephemera/kit/metrics";
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

/** Attempts at dropping a deleted sandbox's outputs while the store is down (about a minute in all). */
const DROP_ATTEMPTS = 8;

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
  const stopping = new AbortController();
  const feed = new Feed(store, [projections.plugins, projections.workflows, projections.sandboxes]);
  const cleanups = new Set<Promise<void>>();
  feed.onCommit((commit) => {
    const routingKey = deletedSandbox(commit, (id) => projections.sandboxes.get(id)?.state.routingKey);
    if (!routingKey) return;
    const onRetry = (err: unknown, delayMs: number) =>
      logger.warn({ err, sandbox: commit.aggregateId, routingKey, delayMs }, "cannot drop the outputs of a deleted sandbox yet; retrying");
    const drop = (what: string, fn: () => Promise<number>) => {
      const p = dropWithRetries(fn, stopping.signal, onRetry).then(
        (n) => { if (n) logger.info({ sandbox: commit.aggregateId, routingKey, [what]: n }, `${what} of a deleted sandbox dropped`); },
        (err: unknown) => logger.warn({ err, sandbox: commit.aggregateId }, `cannot drop the ${what} of a deleted sandbox`),
      ).finally(() => cleanups.delete(p));
      cleanups.add(p);
    };
    // Its delete steps have read what they needed: the cache and the journal let go of its values.
    drop("cached runs", () => outputs.dropSandbox(routingKey));
    drop("journaled values", () => deps.values.drop(`${routingKey}.`));
  });
  await feed.start();

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
  // NOT_SERVING while NATS is unreachable or a consumer is re-creating itself.
  if (store instanceof JetStreamEventStore) followHealth(server, [store.health]);
  return {
    port: server.port,
    stop: async () => {
      await server.shutdown();
      await feed.stop();
      health?.stop();
      stopping.abort();
      await Promise.allSettled([...cleanups]);
    },
  };
}

/**
 * Values of a deleted sandbox must not outlive it in the cache or the journal: a drop that fails while
 * the store is down is tried again with backoff. (A restart also drops them: the feed
 * replays every `sandbox.deleted`.) A loop rather than kit's retry(): stop() must be able
 * to cut a backoff short.
 */
async function dropWithRetries(
  drop: () => Promise<number>, stop: AbortSignal, onRetry: (err: unknown, delayMs: number) => void,
): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await drop();
    } catch (err) {
      if (!(err instanceof UnavailableError) || attempt >= DROP_ATTEMPTS || stop.aborted) throw err;
      const delayMs = Math.min(30_000, 500 * 2 ** (attempt - 1));
      onRetry(err, delayMs);
      await delay(delayMs, stop);
    }
  }
}

function deletedSandbox(commit: Commit, routingKeyOf: (id: string) => string | undefined): string | undefined {
  if (commit.aggregate !== Aggregates.sandbox) return undefined;
  if (!commit.events.some((e) => e.type === "ephemera.sandbox.deleted.v1")) return undefined;
  return routingKeyOf(commit.aggregateId) || undefined;
}
