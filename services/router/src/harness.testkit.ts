// The router's integration tests' world: a Routes API server, a "baseline" and a "fork" app,
// and a router whose listeners stand for the baseline app's ports, with a rule sending the
// routing key KEY's requests on each of them to the fork.
import { createLogger } from "@ephemera/kit";
import type * as pb from "@ephemera/proto";
import { startApp, type App } from "./apps.testkit.js";
import type { RouterConfig } from "./config.js";
import { startRouter, type RouterOptions, type RunningRouter } from "./router.js";
import { routingRule, TestRoutesServer } from "./routes-server.testkit.js";

export const ORDERS = { kind: "Deployment", namespace: "shop", name: "orders" };
export const KEY = "k3fd0c2a91b7";
export const TOKEN = "viewer-token-for-tests";
export const logger = createLogger("router-test", "silent");
export const FAST_BACKOFF = { baseMs: 50, maxMs: 200 };

export interface Harness {
  routes: TestRoutesServer;
  baseline: App;
  fork: App;
  router: RunningRouter;
  /** The fork rule of KEY, on every app port. */
  rule: pb.routes.WorkloadRoutingRule;
  /** The router's listen port for a baseline app port. */
  listenerOf(appPort: number): number;
  stop(): Promise<void>;
}

/** The baseline's four ports, each a listener of the router (on any free port). */
export const routerConfig = (baseline: App, routesAddress: string): RouterConfig => ({
  workload: ORDERS,
  ports: [baseline.httpPort, baseline.grpcPort, baseline.tcpPort, baseline.greetingPort].map((appPort) => ({ appPort, listenPort: 0 })),
  routes: routesAddress,
  token: TOKEN,
  healthListen: "127.0.0.1:0",
  sniffTimeoutMs: 300,
});

export const forkRule = (baseline: App, fork: App, key = KEY) => routingRule(ORDERS, key, {
  [baseline.httpPort]: { host: "127.0.0.1", port: fork.httpPort },
  [baseline.grpcPort]: { host: "127.0.0.1", port: fork.grpcPort },
  [baseline.tcpPort]: { host: "127.0.0.1", port: fork.tcpPort },
  [baseline.greetingPort]: { host: "127.0.0.1", port: fork.greetingPort },
});

export const listenerOf = (router: RunningRouter, appPort: number) => {
  const listener = router.listeners.find((l) => l.appPort === appPort);
  if (!listener) throw new Error(`the router has no listener for app port ${appPort}`);
  return listener.port;
};

export async function startHarness(options: RouterOptions = {}): Promise<Harness> {
  const [baseline, fork] = await Promise.all([startApp("baseline"), startApp("fork")]);
  const rule = forkRule(baseline, fork);
  // A rule for another workload with the same key: it must not route.
  const routes = await TestRoutesServer.start(0, [rule, routingRule({ ...ORDERS, name: "cart" }, "othercart", {})]);
  const router = await startRouter(routerConfig(baseline, `127.0.0.1:${routes.port}`), logger,
    { listenHost: "127.0.0.1", backoff: FAST_BACKOFF, ...options });
  return {
    routes, baseline, fork, router, rule,
    listenerOf: (appPort) => listenerOf(router, appPort),
    stop: async () => {
      await router.stop();
      routes.stop();
      await Promise.all([baseline.close(), fork.close()]);
    },
  };
}
