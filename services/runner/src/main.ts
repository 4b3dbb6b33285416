// Entry point of the runner service: configuration from the environment, then start().
import { hostname, tmpdir } from "node:os";
import { codeFingerprint, connectNats, JetStreamClaimStore, JetStreamEventStore, JetStreamLeaseStore, JetStreamLogStore, JetStreamSnapshotStore, JetStreamValueStore, JetStreamWorkQueue } from "@ephemera/eventstore";
import { createLogger, defaultSigningKeyFile, onShutdown, signingKeys } from "@ephemera/kit";
import { metricsListen, serviceRegistry, startMetricsServer } from "@ephemera/kit/metrics";
import { runnerConfig } from "./config.js";
import { dispatchCodec } from "@ephemera/events";
import { start } from "./start.js";
import { launcherPath } from "./launcher.js";
import { incarnation } from "./incarnation.js";
import { defaultWorkRoot } from "./driver/workroot.js";

const logger = createLogger("runner");

try {
  const config = runnerConfig(process.env, {
    launcher: launcherPath(), workRoot: defaultWorkRoot(tmpdir()), runnerId: incarnation(hostname(), process.pid),
  });
  const metrics = serviceRegistry("runner");
  const metricsServer = await startMetricsServer(metricsListen(process.env, "runner"), metrics, logger);
  const nc = await connectNats(config.natsUrl, "runner", config.natsAuth);
  const replicas = config.streamReplicas ?? 1;
  const store = await JetStreamEventStore.open(nc, { prefix: config.prefix, logger, metrics, replicas });
  const queue = await JetStreamWorkQueue.open(nc, config.prefix, dispatchCodec, { logger, replicas });
  const logs = await JetStreamLogStore.open(nc, config.prefix, { retentionMs: config.logRetentionMs, replicas, logger });
  const [signingKey] = signingKeys(process.env, defaultSigningKeyFile(tmpdir(), config.prefix));
  const values = await JetStreamValueStore.open(nc, config.prefix, { replicas });
  const claims = await JetStreamClaimStore.open(nc, config.prefix, { replicas });
  // One replica per cluster reconciles its forks: the holder of the lease forks-<cluster>.
  const leases = await JetStreamLeaseStore.open(nc, config.prefix, { replicas });
  // The reconcilers' projections start from their snapshots, written by the same code.
  const snapshots = { store: await JetStreamSnapshotStore.open(nc, config.prefix, { replicas }), fingerprint: codeFingerprint() };
  const runner = await start(config, { store, queue, logs, claims, logger, signingKey: signingKey!, values, metrics, leases, snapshots });
  onShutdown(logger, [() => metricsServer.stop(), async () => { await nc.drain(); }, () => runner.stop()]);
} catch (err) {
  logger.fatal({ err }, "runner failed to start");
  process.exit(1);
}
