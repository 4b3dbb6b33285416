// Entry point of the runner service: configuration from the environment, then start().
import { hostname, tmpdir } from "node:os";
import { connectNats, JetStreamEventStore, JetStreamLogStore, JetStreamValueStore, JetStreamWorkQueue } from "@ephemera/eventstore";
import { createLogger, defaultSigningKeyFile, onShutdown, signingKeys } from "@ephemera/kit";
import { metricsListen, serviceRegistry, startMetricsServer } from "@ephemera/kit/metrics";
import { runnerConfig } from "./config.js";
import { dispatchCodec } from "@ephemera/events";
import { start } from "./start.js";
import { launcherPath } from "./launcher.js";

const logger = createLogger("runner");

try {
  const config = runnerConfig(process.env, {
    launcher: launcherPath(), tmpdir: tmpdir(), runnerId: `${hostname()}-${process.pid}`,
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
  const runner = await start(config, { store, queue, logs, logger, signingKey: signingKey!, values, metrics });
  onShutdown(logger, [() => metricsServer.stop(), async () => { await nc.drain(); }, () => runner.stop()]);
} catch (err) {
  logger.fatal({ err }, "runner failed to start");
  process.exit(1);
}
