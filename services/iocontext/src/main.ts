// Entry point of the iocontext service: configuration from the environment, then start().
import { codeFingerprint, connectNats, JetStreamEventStore, JetStreamLeaseStore, JetStreamSnapshotStore, JetStreamValueStore } from "@ephemera/eventstore";
import { tmpdir } from "node:os";
import {
  DEFAULT_IOCONTEXT_LISTEN, DEFAULT_RECENT_BYTES, commonConfig, configured, createLogger, serverTlsFromEnv, defaultSigningKeyFile, envInt, envString, onShutdown, signingKeys,
} from "@ephemera/kit";
import { metricsListen, serviceRegistry, startMetricsServer } from "@ephemera/kit/metrics";
import { openRedis } from "./redis.js";
import { start } from "./start.js";

const logger = createLogger("iocontext");
const common = configured(logger, "iocontext", () => commonConfig(process.env));
const listen = envString(process.env, "EPHEMERA_IOCONTEXT_LISTEN", DEFAULT_IOCONTEXT_LISTEN);
const tls = configured(logger, "iocontext", () => serverTlsFromEnv(process.env));
const recentBytes = configured(logger, "iocontext", () => envInt(process.env, "EPHEMERA_IOCONTEXT_RECENT_BYTES", DEFAULT_RECENT_BYTES));
const metricsAt = metricsListen(process.env, "iocontext");
const metrics = serviceRegistry("iocontext");

try {
  const nc = await connectNats(common.natsUrl, "iocontext", common.natsAuth);
  const metricsServer = await startMetricsServer(metricsAt, metrics, logger);
  const store = await JetStreamEventStore.open(nc, { prefix: common.prefix, logger, metrics, replicas: common.streamReplicas });
  const redis = openRedis(common.redisUrl, {}, common.redisAuth);
  redis.on("error", (err: Error) => logger.warn({ err }, "redis connection error"));
  const keys = signingKeys(process.env, defaultSigningKeyFile(tmpdir(), common.prefix));
  const values = await JetStreamValueStore.open(nc, common.prefix, { replicas: common.streamReplicas });
  const snapshots = { store: await JetStreamSnapshotStore.open(nc, common.prefix, { replicas: common.streamReplicas }), fingerprint: codeFingerprint() };
  // One replica drops deleted sandboxes' outputs: the holder of the drops' lease.
  const leases = await JetStreamLeaseStore.open(nc, common.prefix, { replicas: common.streamReplicas });
  const service = await start({ listen, prefix: common.prefix, ...(tls ? { tls } : {}), keys, metrics, recentBytes }, { store, values, redis, logger, snapshots, leases });
  onShutdown(logger, [
    () => metricsServer.stop(),
    async () => { await nc.drain(); },
    async () => { await redis.quit(); },
    () => service.stop(),
  ]);
} catch (err) {
  logger.fatal({ err }, "iocontext failed to start");
  process.exit(1);
}
