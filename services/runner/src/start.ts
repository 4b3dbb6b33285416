// Composition of the runner service: its driver (the process driver probed, or the
// Kubernetes driver's watch listed, before any work is taken), the work-queue consumer and
// a gRPC health endpoint.
import { access, mkdir } from "node:fs/promises";
import { hostname } from "node:os";
import { deadHere } from "./incarnation.js";
import type * as pb from "@ephemera/proto";
import { JetStreamEventStore, JetStreamWorkQueue, type ClaimStore, type EventStore, type LeaseStore, type LogStore, type SnapshotStore, type WorkQueue } from "@ephemera/eventstore";
import { errorMessage, followHealth, startGrpcServer, type Logger, type SigningKey } from "@ephemera/kit";
import { grpcClientMetrics, grpcServerMetrics, type Registry } from "@ephemera/kit/metrics";
import type { ValueJournal } from "@ephemera/events";
import type { RunnerConfig } from "./config.js";
import { detectIsolation } from "./driver/isolation.js";
import { cleanupLeftovers } from "./driver/leftovers.js";
import { ProcessDriver } from "./driver/process.js";
import { openStepNetwork } from "./driver/network.js";
import { DEFAULT_STEP_SUBNETS, stepSubnets } from "./driver/network-plan.js";
import type { StepDriver } from "./driver/driver.js";
// Types only: client-node is loaded when the Kubernetes driver is chosen, not by every runner.
import type { KubeDriver } from "./driver/kube/driver.js";
import { inputMetrics, kubeApiMetrics, queueMetrics, stepMetrics } from "./metrics.js";
import { Runner } from "./runner.js";
import { readStepRun } from "./steprun/store.js";
import { ForkReconciler, NoWorkloads, type ForkCluster } from "./forks/reconciler.js";
import type { GroupPods } from "./jobs/group-pods.js";
import { LocalReconciler, type LocalCluster } from "./forks/local-reconciler.js";
import { outputsRead, readOutputs } from "./forks/outputs.js";

export interface RunnerDeps {
  store: EventStore;
  queue: WorkQueue<pb.StepDispatch>;
  logs: LogStore;
  /** Who holds each run (JetStreamClaimStore): what keeps a redelivered live run from being run again. */
  claims: ClaimStore;
  logger: Logger;
  /** Signs the runs' capability tokens (kit's signingKeys: the first key). */
  signingKey: SigningKey;
  /** The output journal (JetStreamValueStore). */
  values: ValueJournal;
  /** The service's metrics registry (served by main); absent: nothing counted. */
  metrics?: Registry;
  /** Where the replicas of a cluster's runner hold the fork reconciler's lease; absent: this process is the only one. */
  leases?: LeaseStore;
  /** Where the fork, local and group pod reconcilers keep their projections' snapshots (with the code's fingerprint); absent: each start replays the stream. */
  snapshots?: { store: SnapshotStore; fingerprint: string };
}

export interface RunningRunner {
  port: number;
  /** Run ids being worked on right now. */
  running(): string[];
  stop(): Promise<void>;
}

/** How often the Kubernetes driver's API call counts are logged (when they moved). */
const API_CALLS_LOG_MS = 60_000;

export async function start(config: RunnerConfig, deps: RunnerDeps): Promise<RunningRunner> {
  const { logger } = deps;
  const registry = deps.metrics;
  const processes = config.driver === "kubernetes" ? undefined : await processDriver(config, logger, registry, deps.values);
  const { driver, forkCluster, localCluster, jobPods } = processes
    ? { driver: processes, forkCluster: new NoWorkloads(config.cluster), localCluster: undefined, jobPods: undefined }
    : await kubeDriver(config, deps);
  const runner = new Runner({
    cluster: config.cluster,
    concurrency: config.concurrency,
    runnerId: config.runnerId,
    driver,
    store: deps.store,
    queue: deps.queue,
    logs: deps.logs,
    logger,
    cancelGraceMs: config.cancelGraceMs ?? 10_000,
    heartbeatMs: config.heartbeatMs ?? 5_000,
    claims: deps.claims,
    claimTtlMs: config.claimTtlMs ?? 6 * (config.heartbeatMs ?? 5_000),
    // A process-driver step dies with its runner: a dead incarnation's claim here is void at once.
    ...(processes ? { holderGone: deadHere(hostname()) } : {}),
    values: deps.values,
    now: () => performance.now(),
    signingKey: deps.signingKey,
    ...(registry ? { metrics: stepMetrics(registry) } : {}),
  });
  if (registry) {
    const queue = deps.queue;
    if (queue instanceof JetStreamWorkQueue) queueMetrics(registry, config.cluster, (c) => queue.backlog(c), logger);
    if (isKube(driver)) kubeApiMetrics(registry, driver.calls);
  }
  const server = await startGrpcServer(config.listen, [], logger, registry ? { interceptors: [grpcServerMetrics(registry)] } : {});
  // The sandboxes' forks on this cluster (answered skipped where it runs no workloads).
  const forks = new ForkReconciler({
    store: deps.store, cluster: forkCluster, clusterName: config.cluster, logger: logger.child({ component: "forks" }), ...(deps.leases ? { leases: deps.leases } : {}),
    ...(deps.snapshots ? { snapshots: deps.snapshots } : {}),
  });
  // The sandboxes' local workloads a workstation serves (a cluster that runs no workloads has nothing to route to them).
  const locals = localCluster
    && new LocalReconciler({
      store: deps.store, cluster: localCluster, clusterName: config.cluster, logger: logger.child({ component: "locals" }), ...(deps.leases ? { leases: deps.leases } : {}),
      ...(deps.snapshots ? { snapshots: deps.snapshots } : {}),
    });
  // NOT_SERVING while NATS is unreachable or a consumer (the work queue's included) is re-creating itself,
  // and for good once a projection cannot fold an event.
  const projections = [forks.health, ...(locals ? [locals.health] : []), ...(jobPods ? [jobPods.health] : [])];
  followHealth(server, deps.store instanceof JetStreamEventStore ? [deps.store.health, ...projections] : projections);
  runner.start();
  await forks.start();
  await locals?.start();
  // The pods of the job runner groups of this cluster (Kubernetes driver, with EPHEMERA_POD_JOBS).
  await jobPods?.start();
  logger.info({ cluster: config.cluster, concurrency: config.concurrency, runner: config.runnerId, driver: driver.name }, "runner taking work");
  const logCalls = isKube(driver) ? apiCallLogger(driver, logger) : undefined;
  let stopping: Promise<void> | undefined;
  return {
    port: server.port,
    running: () => runner.running(),
    stop: () => (stopping ??= (async () => {
      server.health.setStatus("", "NOT_SERVING");
      await jobPods?.stop();
      await locals?.stop();
      await forks.stop();
      await runner.stop(config.shutdownGraceMs ?? 30_000);
      // The steps' network goes once no step runs.
      await processes?.stop();
      logCalls?.();
      await server.shutdown();
    })()),
  };
}

/** Logs the Kubernetes API calls by verb and resource every so often, and once more at the end. */
function apiCallLogger(driver: KubeDriver, logger: Logger): () => void {
  let last = "";
  const log = () => {
    const calls = driver.apiCalls();
    const text = JSON.stringify(calls);
    if (text === last) return;
    last = text;
    logger.info({ calls, writes: driver.calls.writes() }, "Kubernetes API calls so far");
  };
  const timer = setInterval(log, API_CALLS_LOG_MS);
  timer.unref();
  return () => {
    clearInterval(timer);
    log();
  };
}

const isKube = (d: StepDriver): d is KubeDriver => d.name === "kubernetes";

async function kubeDriver(
  config: RunnerConfig, deps: RunnerDeps,
): Promise<{ driver: StepDriver; forkCluster: ForkCluster; localCluster: LocalCluster; jobPods: GroupPods | undefined }> {
  const kube = config.kube!;
  const [k8s, { KubeDriver }, { KubeForkCluster }] = await Promise.all([
    import("@kubernetes/client-node"), import("./driver/kube/driver.js"), import("./forks/kube.js"),
  ]);
  const kubeconfig = new k8s.KubeConfig();
  // KUBECONFIG, else ~/.kube/config, else the pod's service account.
  kubeconfig.loadFromDefault();
  const driver = new KubeDriver({
    kubeconfig, namespace: kube.namespace, prefix: config.prefix, agentImage: kube.agentImage, podIOContext: kube.podIOContext,
    iocontext: config.iocontextAddr, ...(config.iocontextTls ? { iocontextTls: config.iocontextTls } : {}), logger: deps.logger,
    graces: { imagePullMs: kube.imagePullGraceMs, unknownMs: kube.nodeLostGraceMs },
    ...(kube.resources ? { resources: kube.resources } : {}),
    isFinished: async (runId) => {
      const { state } = await readStepRun(deps.store, runId);
      return state.status === "succeeded" || state.status === "failed";
    },
  });
  await driver.start().catch((err: unknown) => {
    throw new Error(`the Kubernetes driver cannot start (cluster ${kubeconfig.getCurrentCluster()?.server ?? "none: set KUBECONFIG"}): ${errorMessage(err)}`);
  });
  deps.logger.info({ cluster: kubeconfig.getCurrentCluster()?.server, namespace: kube.namespace, agentImage: kube.agentImage, routingMesh: kube.routingMesh }, "Kubernetes driver ready");
  const forkCluster = new KubeForkCluster({
    kubeconfig, calls: driver.calls, logger: deps.logger.child({ component: "forks" }),
    outputs: (d, forks) => readOutputs(deps.store, deps.values, d.routingKey, outputsRead(forks)),
    mesh: kube.routingMesh,
  });
  if (!kube.podJobs) deps.logger.info("no pods for job runner groups: EPHEMERA_POD_JOBS is not set");
  const jobPods = kube.podJobs ? new (await import("./jobs/group-pods.js")).GroupPods({
    store: deps.store, kubeconfig, calls: driver.calls, clusterName: config.cluster, prefix: config.prefix,
    agentImage: kube.agentImage, podJobs: kube.podJobs, signingKey: deps.signingKey, logger: deps.logger.child({ component: "jobpods" }),
    ...(deps.leases ? { leases: deps.leases } : {}), ...(deps.snapshots ? { snapshots: deps.snapshots } : {}),
  }) : undefined;
  return { driver, forkCluster, localCluster: forkCluster, jobPods };
}

async function processDriver(config: RunnerConfig, logger: Logger, registry: Registry | undefined, values: ValueJournal): Promise<ProcessDriver> {
  await access(config.launcher).catch((err: unknown) => {
    throw new Error(`the step launcher is missing at ${config.launcher} (build it: pnpm build, which needs a C compiler)`, { cause: err });
  });
  await mkdir(config.workdir, { recursive: true });
  // What a crashed predecessor left: its step processes go, its run directories too (but
  // those holding a report, whose result this runner records when the run is delivered again).
  await cleanupLeftovers(config.workdir, logger);
  const isolation = await detectIsolation(config.workdir, config.launcher);
  logger.info({ isolation: isolation.flags.join(" "), workdir: config.workdir }, "process driver ready");
  if (!isolation.pidNamespace) logger.warn(isolation, "steps may leave processes behind: no pid namespace here");
  const network = await openStepNetwork({
    mode: config.stepNetwork ?? "outside", prefix: config.prefix, workdir: config.workdir, slots: config.concurrency, isolation,
    subnets: config.stepSubnets ?? stepSubnets(DEFAULT_STEP_SUBNETS), ...(config.stepDns ? { dns: config.stepDns } : {}),
    ...(config.stepDeny ? { deny: config.stepDeny } : {}), logger,
  });
  return new ProcessDriver({
    network,
    ...(config.iocontextTls ? { iocontextTls: config.iocontextTls } : {}),
    workdir: config.workdir, iocontext: config.iocontextAddr, launcher: config.launcher, isolation, hostEnv: config.hostEnv, logger,
    // A planned dispatch's inputs: from the steps it ran, or the output journal (no IO-context call).
    values, ...(config.recentBytes !== undefined ? { recentBytes: config.recentBytes } : {}),
    // Its calls to the IO context (a step's inputs, a success's outputs), by method and code.
    ...(registry ? { iocontextInterceptors: [grpcClientMetrics(registry)], onInputs: inputMetrics(registry) } : {}),
    ...(config.stepNiceness ? { niceness: config.stepNiceness } : {}),
    // The scripts' user and quota (nobody and 256 MiB tmpfs views by default, when root).
    ...(config.stepSandbox ? { sandbox: config.stepSandbox } : {}),
  });
}
