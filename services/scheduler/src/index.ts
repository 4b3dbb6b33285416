// The scheduler service: workflow planning, timers, and the outbox that dispatches.
import { dispatchCodec } from "@ephemera/events";
import { JetStreamEventStore, JetStreamLeaseStore, JetStreamWorkQueue, connectNats, JetStreamSnapshotStore, codeFingerprint } from "@ephemera/eventstore";
import { followHealth, startGrpcServer, type CommonConfig, type Logger } from "@ephemera/kit";
import { grpcServerMetrics, type Registry } from "@ephemera/kit/metrics";
import { workflowMetrics } from "./metrics.js";
import { Scheduler } from "./scheduler.js";

export { Scheduler } from "./scheduler.js";
export { decide as decideWorkflow, nextDue, commandKey, type WorkflowCommand } from "./workflow/decide.js";
export { evolve as evolveWorkflow, initialWorkflow, type WorkflowState, type StepState } from "./workflow/state.js";
export { planSteps } from "./workflow/plan.js";
export { workflowMetrics, type WorkflowMetrics } from "./metrics.js";
export * from "./workflow/policy.js";

export interface SchedulerConfig extends CommonConfig {
  listen: string;
  /** The service's metrics registry (served by main); absent: nothing counted. */
  metrics?: Registry;
}

export async function start(config: SchedulerConfig, logger: Logger): Promise<{ stop(): Promise<void>; port: number }> {
  const nc = await connectNats(config.natsUrl, "ephemera-scheduler", config.natsAuth);
  const registry = config.metrics;
  const replicas = config.streamReplicas ?? 1;
  const store = await JetStreamEventStore.open(nc, { prefix: config.prefix, logger, replicas, ...(registry ? { metrics: registry } : {}) });
  const queue = await JetStreamWorkQueue.open(nc, config.prefix, dispatchCodec, { logger, replicas });
  const snapshots = { store: await JetStreamSnapshotStore.open(nc, config.prefix, { replicas }), fingerprint: codeFingerprint() };
  // The replicas share one timers' lease: one fires the retries, deadlines and no-runner timers.
  const leases = await JetStreamLeaseStore.open(nc, config.prefix, { replicas });
  const scheduler = new Scheduler({ store, queue, leases, logger, snapshots, ...(registry ? { metrics: workflowMetrics(registry) } : {}) });
  await scheduler.start();
  const server = await startGrpcServer(config.listen, [], logger, registry ? { interceptors: [grpcServerMetrics(registry)] } : {});
  // NOT_SERVING while NATS is unreachable or a consumer is re-creating itself, and for good once a projection cannot fold an event.
  followHealth(server, [store.health, scheduler.health]);
  logger.info({ prefix: config.prefix }, "scheduler started");
  return {
    port: server.port,
    stop: async () => {
      await server.shutdown();
      await scheduler.stop();
      await nc.drain();
    },
  };
}
