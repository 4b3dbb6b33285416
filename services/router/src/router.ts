// ephemera-router put together: the rules table fed by the Routes API's watch, a listener
// per app port, the shared upstream connections and the health endpoint.
import type { Logger } from "@ephemera/kit";
import type { PortMapping, RouterConfig } from "./config.js";
import { startHealth } from "./health.js";
import { startListener } from "./proxy/listener.js";
import { Upstreams } from "./proxy/upstreams.js";
import { RoutingTable } from "./rules/table.js";
import { watchRoutingRules, type Backoff } from "./rules/watch.js";

export interface RouterOptions {
  /** Where the listeners listen: 0.0.0.0 in a pod (REDIRECT sends to the interface's address); tests use loopback. */
  listenHost?: string;
  /** The watch's backoff when it is cut. */
  backoff?: Backoff;
}

export interface RunningRouter {
  /** Each app port's listener and the port it bound. */
  listeners: Array<PortMapping & { port: number }>;
  healthPort: number;
  table: RoutingTable;
  /** Stops: with `drainMs`, the requests under way get that long to finish (see RunningListener.close). */
  stop(options?: { drainMs?: number }): Promise<void>;
}

export async function startRouter(config: RouterConfig, logger: Logger, options: RouterOptions = {}): Promise<RunningRouter> {
  const table = new RoutingTable(config.workload);
  const upstreams = new Upstreams(logger);
  const watch = watchRoutingRules({
    address: config.routes, workload: config.workload, table, logger,
    ...(config.token ? { token: config.token } : {}),
    ...(config.tls ? { tls: config.tls } : {}),
    ...(options.backoff ? { backoff: options.backoff } : {}),
  });
  const started: Array<{ close(drainMs?: number): Promise<void> }> = [];
  try {
    const listeners = [];
    for (const mapping of config.ports) {
      const listener = await startListener(mapping, {
        host: options.listenHost ?? "0.0.0.0", table, upstreams, sniffTimeoutMs: config.sniffTimeoutMs, logger,
      });
      started.push(listener);
      listeners.push({ ...mapping, port: listener.port });
    }
    const health = await startHealth(config.healthListen, () => ({ ready: table.ready, watching: watch.synced, rules: table.keys.length }));
    started.push(health);
    const { kind, namespace, name } = config.workload;
    logger.info({
      workload: `${kind}/${namespace}/${name}`, routes: config.routes, tls: !!config.tls, token: !!config.token,
      ports: listeners.map((l) => `${l.appPort}→${l.port}`), health: config.healthListen,
    }, "ephemera-router listening");
    return {
      listeners,
      healthPort: health.port,
      table,
      stop: async ({ drainMs = 0 } = {}) => {
        // The rules stay as they are for the requests still under way.
        watch.stop();
        await Promise.all(started.map((s) => s.close(drainMs)));
        upstreams.close();
      },
    };
  } catch (err) {
    watch.stop();
    await Promise.all(started.map((s) => s.close()));
    upstreams.close();
    throw err;
  }
}
