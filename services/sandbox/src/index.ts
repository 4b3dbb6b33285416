// The sandbox service: sandbox lifecycle, the plugin registry and the public API.
import { JetStreamEventStore, JetStreamLogStore, connectNats } from "@ephemera/eventstore";
import { followHealth, isLoopback, randomToken, startGrpcServer, type CommonConfig, type Logger, type ServerTls } from "@ephemera/kit";
import { apiServices } from "./api.js";
import type { ApiAccess } from "./auth/access.js";
import { SandboxCore } from "./service.js";

export { SandboxCore } from "./service.js";
export { decidePlugin, type PluginCommand } from "./plugin/decide.js";
export { decideSandbox, type SandboxCommand } from "./sandbox/decide.js";
export { sandboxStatus } from "./sandbox/status.js";
export { apiAccess, apiAccessConfigFromEnv, type ApiAccess, type ApiAccessConfig } from "./auth/access.js";
export { API_POLICY } from "./auth/policy.js";
export { ROLES, type Role, type Principal } from "./auth/roles.js";

export interface SandboxConfig extends CommonConfig {
  listen: string;
  previewDomain: string;
  /** Bearer tokens and roles (EPHEMERA_API_TOKENS, EPHEMERA_API_JWKS); absent: the API is open. */
  access?: ApiAccess;
  /** Open without tokens on an address other machines reach (EPHEMERA_API_ALLOW_OPEN). */
  allowOpen?: boolean;
  /** EPHEMERA_TLS_CERT and EPHEMERA_TLS_KEY (and EPHEMERA_TLS_CLIENT_CA); absent: plaintext. */
  tls?: ServerTls;
}

/**
 * An API without tokens lets anyone who reaches it apply and delete: fine on loopback (a
 * laptop's `pnpm start`), refused elsewhere unless asked for. Returns what to log.
 */
export function openApiNotice(config: Pick<SandboxConfig, "listen" | "access" | "allowOpen">): string | undefined {
  if (config.access) return undefined;
  const open = `the API on ${config.listen} is open: no EPHEMERA_API_TOKENS or EPHEMERA_API_JWKS, so anyone who reaches it may apply and delete`;
  if (isLoopback(config.listen)) return `${open} (loopback only: processes of this machine)`;
  if (!config.allowOpen) {
    throw new Error(`${open}, from other machines too. Set EPHEMERA_API_TOKENS or EPHEMERA_API_JWKS (docs/security.md), listen on loopback, or set EPHEMERA_API_ALLOW_OPEN=true`);
  }
  return `${open}, from other machines too (EPHEMERA_API_ALLOW_OPEN)`;
}

export async function start(config: SandboxConfig, logger: Logger): Promise<{ stop(): Promise<void>; port: number }> {
  const open = openApiNotice(config);
  const nc = await connectNats(config.natsUrl, "ephemera-sandbox", config.natsAuth);
  const store = await JetStreamEventStore.open(nc, { prefix: config.prefix, logger });
  const logs = await JetStreamLogStore.open(nc, config.prefix);
  const core = new SandboxCore({ store, logs, logger, routingKey: () => randomToken(12), previewDomain: config.previewDomain });
  await core.start();
  const server = await startGrpcServer(config.listen, apiServices(core, logger, config.access), logger, config.tls ? { tls: config.tls } : {});
  // NOT_SERVING while NATS is unreachable or a consumer is re-creating itself.
  followHealth(server, [store.health]);
  if (open) logger.warn(open);
  else logger.info({ access: config.access?.describe }, "the API asks every call for a bearer token");
  logger.info({ prefix: config.prefix, listen: config.listen, tls: !!config.tls }, "sandbox service started");
  return {
    port: server.port,
    stop: async () => {
      await core.stop();
      await server.shutdown();
      await nc.drain();
    },
  };
}
