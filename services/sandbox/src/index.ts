// The sandbox service: sandbox lifecycle, the plugin registry and the public API.
import { JetStreamEventStore, JetStreamLeaseStore, JetStreamLogStore, JetStreamSnapshotStore, JetStreamValueStore, codeFingerprint, connectNats } from "@ephemera/eventstore";
import { Aggregates } from "@ephemera/events";
import {
  GATEWAY_SERVER, ROUTES_SERVER, followHealth, openApiNotice, randomToken, startGrpcServer, type CommonConfig, type Logger, type ServerTls, type SigningKey,
} from "@ephemera/kit";
import { grpcServerMetrics, type Registry } from "@ephemera/kit/metrics";
import { apiServices } from "./api.js";
import type { ApiAccess } from "./auth/access.js";
import { jobMetrics } from "./job/metrics.js";
import { sandboxMetrics } from "./metrics.js";
import type { AdmissionSettings } from "./sandbox/admission.js";
export { DEFAULT_ADMISSION, type AdmissionSettings } from "./sandbox/admission.js";
import { SandboxCore } from "./service.js";
import { startRoutes } from "./routes/server.js";
import { startGateway } from "./gateway/server.js";
import { DEFAULT_TUNNEL_CHECK, TunnelCheck, type TunnelCheckOptions } from "./locals/health.js";
import { JobAgentServer } from "./job/agent.js";

export { SandboxCore } from "./service.js";
export { JobAgentServer } from "./job/agent.js";
export { decidePlugin, type PluginCommand } from "./plugin/decide.js";
export { decideSandbox, type SandboxCommand } from "./sandbox/decide.js";
export { sandboxStatus } from "./sandbox/status.js";
export { apiAccess, apiAccessConfigFromEnv, type ApiAccess, type ApiAccessConfig } from "./auth/access.js";
export { API_POLICY } from "./auth/policy.js";
export { DEFAULT_TUNNEL_CHECK, type TunnelCheckOptions } from "./locals/health.js";
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
  /** The service's metrics registry (served by main); absent: nothing counted. */
  metrics?: Registry;
  /** The Routes API: gRPC (EPHEMERA_ROUTES_LISTEN) and HTTP (EPHEMERA_ROUTES_HTTP_LISTEN); absent: not served. */
  routes?: { listen: string; httpListen: string };
  /** The preview gateway (EPHEMERA_GATEWAY_LISTEN; EPHEMERA_GATEWAY_DNS: the name servers of the targets' hosts); absent: not served. */
  gateway?: { listen: string; dns?: string[] };
  /** How long a pod has to report a job it was told to cancel (default 10 s; tests shorten it). */
  jobCancelGraceMs?: number;
  /** How long past a group's jobTimeout a running job's pod has to report it (default 60 s; tests shorten it). */
  jobTimeoutGraceMs?: number;
  /**
   * The JobAgent server the job runner groups' pods call (EPHEMERA_JOBS_LISTEN), with the keys
   * that check their tokens (the runner's signing keys, EPHEMERA_SIGNING_KEY…); absent: not served.
   */
  jobs?: { listen: string; keys: SigningKey[]; podLostGraceMs?: number; artifactMaxBytes?: number };
  /** The tunnel health check of connected locals (EPHEMERA_LOCALS_CHECK); absent: every 5 s, 2 s to answer. */
  localsCheck?: TunnelCheckOptions;
  /** When creates wait under a burst (EPHEMERA_ADMISSION_WAITING, EPHEMERA_ADMISSION_TIMEOUT); absent: DEFAULT_ADMISSION. */
  admission?: AdmissionSettings;
}

export interface RunningSandboxService {
  /** The API's port. */
  port: number;
  /** The Routes API's gRPC and HTTP ports, when it is served. */
  routes?: { port: number; httpPort: number };
  /** The preview gateway's port, when it is served. */
  gateway?: { port: number };
  /** The JobAgent server's port, when it is served. */
  jobs?: { port: number };
  stop(): Promise<void>;
}

export async function start(config: SandboxConfig, logger: Logger): Promise<RunningSandboxService> {
  // Open without tokens on loopback only, unless asked for (EPHEMERA_API_ALLOW_OPEN).
  const allowOpen = config.allowOpen ? { allowOpen: true } : {};
  const open = [
    openApiNotice(config.listen, { secured: !!config.access, ...allowOpen }),
    ...(config.routes ? [config.routes.listen, config.routes.httpListen] : [])
      .map((listen) => openApiNotice(listen, { secured: !!config.access, ...allowOpen, server: ROUTES_SERVER })),
    ...(config.gateway ? [openApiNotice(config.gateway.listen, { secured: !!config.access, ...allowOpen, server: GATEWAY_SERVER })] : []),
  ].filter((line) => line !== undefined);
  const nc = await connectNats(config.natsUrl, "ephemera-sandbox", config.natsAuth);
  const registry = config.metrics;
  const replicas = config.streamReplicas ?? 1;
  const store = await JetStreamEventStore.open(nc, { prefix: config.prefix, logger, replicas, ...(registry ? { metrics: registry } : {}) });
  const logs = await JetStreamLogStore.open(nc, config.prefix, { replicas, logger });
  const values = await JetStreamValueStore.open(nc, config.prefix, { replicas });
  const snapshots = { store: await JetStreamSnapshotStore.open(nc, config.prefix, { replicas }), fingerprint: codeFingerprint() };
  // The replicas of the service share one timers' lease: one fires the TTLs and job deadlines.
  const leases = await JetStreamLeaseStore.open(nc, config.prefix, { replicas });
  const core = new SandboxCore({ store, logs, values, leases, logger, snapshots, routingKey: () => randomToken(12), previewDomain: config.previewDomain,
    ...(config.jobCancelGraceMs !== undefined ? { jobCancelGraceMs: config.jobCancelGraceMs } : {}),
    ...(config.jobTimeoutGraceMs !== undefined ? { jobTimeoutGraceMs: config.jobTimeoutGraceMs } : {}),
    ...(config.admission ? { admission: config.admission } : {}),
  });
  await core.start();
  const tunnelCheck = new TunnelCheck({ store, locals: core.locals, logger, sandboxes: () => liveSandboxes(core) }, config.localsCheck ?? DEFAULT_TUNNEL_CHECK);
  tunnelCheck.start();
  if (registry) sandboxMetrics(registry, core);
  if (registry) jobMetrics(registry, core);
  const routes = config.routes
    ? await startRoutes({
      sandboxes: () => core.placedSandboxes(), routeGroups: () => core.routeGroups.records(), onSandboxChange: (l) => core.onSandboxChange(l),
    },
      { ...config.routes, ...(config.access ? { access: config.access } : {}), ...(config.tls ? { tls: config.tls } : {}) }, logger)
    : undefined;
  const gateway = config.gateway
    ? await startGateway({ sandboxes: () => records(core) }, {
      listen: config.gateway.listen, domain: config.previewDomain, ...(config.gateway.dns?.length ? { dns: config.gateway.dns } : {}),
      ...(config.access ? { access: config.access } : {}), ...(config.tls ? { tls: config.tls } : {}),
    }, logger)
    : undefined;
  const jobs = config.jobs ? await startJobAgent(core, config.jobs, config.tls, logger) : undefined;
  const server = await startGrpcServer(config.listen, apiServices(core, logger, config.access), logger, {
    ...(config.tls ? { tls: config.tls } : {}), ...(registry ? { interceptors: [grpcServerMetrics(registry)] } : {}),
  });
  // NOT_SERVING while NATS is unreachable or a consumer is re-creating itself, and for good once a projection cannot fold an event.
  followHealth(server, [store.health, core.feed]);
  for (const line of open) logger.warn(line);
  if (config.access) logger.info({ access: config.access.describe }, "the API and the Routes API ask every call for a bearer token");
  logger.info({ prefix: config.prefix, listen: config.listen, tls: !!config.tls }, "sandbox service started");
  return {
    port: server.port,
    ...(routes ? { routes: { port: routes.port, httpPort: routes.httpPort } } : {}),
    ...(gateway ? { gateway: { port: gateway.port } } : {}),
    ...(jobs ? { jobs: { port: jobs.port } } : {}),
    stop: async () => {
      await jobs?.stop();
      await gateway?.stop();
      await routes?.stop();
      await tunnelCheck.stop();
      await core.stop();
      await server.shutdown();
      await nc.drain();
    },
  };
}

/** The JobAgent server on its own listener: the pods reach it, not the API's clients. */
export async function startJobAgent(core: SandboxCore, config: NonNullable<SandboxConfig["jobs"]>, tls: ServerTls | undefined, logger: Logger) {
  const agent = new JobAgentServer({
    jobs: core.jobs, logs: core.deps.logs, values: core.deps.values, keys: config.keys,
    ...(config.artifactMaxBytes !== undefined ? { artifactMaxBytes: config.artifactMaxBytes } : {}), logger: logger.child({ component: "jobagent" }),
    groupTimeout: (group) => {
      const state = core.jobRunnerGroupStates.get(group)?.state;
      return state && state.status !== "none" ? state.spec.jobTimeout : undefined;
    },
    ...(config.podLostGraceMs !== undefined ? { podLostGraceMs: config.podLostGraceMs } : {}),
  });
  // The feed is live (core.start() replayed it): each job change from now on.
  core.feed.onCommit((c) => {
    if (c.aggregate !== Aggregates.job) return;
    const state = core.jobStates.get(c.aggregateId)?.state;
    if (state?.status === "job") agent.onJobChange(state);
  });
  agent.resume();
  const server = await startGrpcServer(config.listen, [agent.binding()], logger, tls ? { tls } : {});
  logger.info({ listen: config.listen }, "JobAgent server started");
  return { port: server.port, stop: async () => { agent.stop(); await server.shutdown(); } };
}

/** What the gateway serves endpoints of: the sandboxes and the route groups, each under its own routing key. */
function* records(core: SandboxCore) {
  for (const { sandbox } of core.placedSandboxes()) yield sandbox;
  for (const group of core.routeGroups.records()) yield { status: "active" as const, name: `routegroup/${group.name}`, routingKey: group.routingKey, endpoints: group.endpoints };
}

/** The sandboxes not deleted, each with its routing key: whose locals the tunnel check asks about. */
function* liveSandboxes(core: SandboxCore) {
  for (const { sandbox } of core.placedSandboxes()) if (sandbox.status !== "deleted") yield { name: sandbox.name, routingKey: sandbox.routingKey };
}
