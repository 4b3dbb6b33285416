// The sandbox service: sandbox lifecycle, the plugin registry and the public API.
import { JetStreamEventStore, JetStreamLogStore, connectNats } from "@ephemera/eventstore";
import { followHealth, randomToken, startGrpcServer, type CommonConfig, type Logger } from "@ephemera/kit";
import { apiServices } from "./api.js";
import { SandboxCore } from "./service.js";

export { SandboxCore } from "./service.js";
export { decidePlugin, type PluginCommand } from "./plugin/decide.js";
export { decideSandbox, type SandboxCommand } from "./sandbox/decide.js";
export { sandboxStatus } from "./sandbox/status.js";

export interface SandboxConfig extends CommonConfig {
  listen: string;
  previewDomain: string;
}

export async function start(config: SandboxConfig, logger: Logger): Promise<{ stop(): Promise<void>; port: number }> {
  const nc = await connectNats(config.natsUrl, "ephemera-sandbox", config.natsAuth);
  const store = await JetStreamEventStore.open(nc, { prefix: config.prefix, logger });
  const logs = await JetStreamLogStore.open(nc, config.prefix);
  const core = new SandboxCore({ store, logs, logger, routingKey: () => randomToken(12), previewDomain: config.previewDomain });
  await core.start();
  const server = await startGrpcServer(config.listen, apiServices(core, logger), logger);
  // NOT_SERVING while NATS is unreachable or a consumer is re-creating itself.
  followHealth(server, [store.health]);
  logger.info({ prefix: config.prefix, listen: config.listen }, "sandbox service started");
  return {
    port: server.port,
    stop: async () => {
      await core.stop();
      await server.shutdown();
      await nc.drain();
    },
  };
}
