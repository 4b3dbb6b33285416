// What ephemera-router costs a baseline request: the bundled router (services/router/dist/
// router.cjs, as the image runs it) as its own process in front of an HTTP/1.1 app (its own
// process too), following a Routes API that holds 100 rules for other keys.
//   latency: GETs without a routing key, alternated one by one between the app directly and
//            through the router, on kept-alive connections; the p50 of each, and what the
//            router adds (p50 through it − p50 direct), per sample. Goal: ≤ 1 ms.
//   load:    32 kept-alive connections through the router for a few seconds; requests/s,
//            and the router's CPU per request from /proc (a Node process runs on one core:
//            1000 requests/s on one core is at most 1 ms of CPU each). Goal: ≥ 1000/s.
//   node test/bench/router.mjs [samples]     (after pnpm build, or pnpm bundle:router)
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { Agent, request } from "node:http";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as pb from "../../services/proto/dist/index.js";
import { grpc, waitFor } from "../../services/kit/dist/client.js";
import { ROOT, freePort, procUsage } from "./system.mjs";

export const ROUTER = join(ROOT, "services/router/dist/router.cjs");
export const GOALS = { addedP50Ms: 1, requestsPerSecond: 1000 };
const WORKLOAD = { kind: "Deployment", namespace: "bench", name: "app" };

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

/** A Routes API that sends `count` rules (other keys, other ports) and SYNCED to every watch. */
async function routesServer(count) {
  const server = new grpc.Server();
  const rules = Array.from({ length: count }, (_, i) => ({
    routingKey: `other${String(i).padStart(7, "0")}`, baseline: WORKLOAD, destinationSandbox: { name: `sb${i}` },
    mappings: [{ workloadPort: 8080, destinations: [{ host: `app-other${i}.bench.svc`, port: 8080 }] }],
  }));
  server.addService(pb.routes.RoutesService, {
    getWorkloadRoutingRules: (_call, callback) => callback(null, { routingRules: rules }),
    watchWorkloadRoutingRules: (call) => {
      for (const route of rules) call.write({ op: pb.routes.WatchOp.ADD, route });
      call.write({ op: pb.routes.WatchOp.SYNCED });
    },
    getClusterServices: (_call, callback) => callback(null, { services: [] }),
  });
  const port = await new Promise((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
  return { port, stop: () => server.forceShutdown() };
}

function child(args, env) {
  const proc = spawn(process.execPath, args, { env: { PATH: process.env.PATH, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  proc.stdout.on("data", (d) => (out += d));
  proc.stderr.on("data", (d) => (out += d));
  return { proc, output: () => out };
}

const get = (agent, port) => new Promise((resolve, reject) => {
  const req = request({ host: "127.0.0.1", port, path: "/orders/1", agent }, (res) => {
    res.resume();
    res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error(`status ${res.statusCode} from port ${port}`))));
  });
  req.on("error", reject);
  req.end();
});

/** True when GET `path` on `port` answers 200. */
const answers = (port, path) => new Promise((resolve) => {
  request({ host: "127.0.0.1", port, path, agent: false }, (res) => {
    res.resume();
    resolve(res.statusCode === 200);
  }).on("error", () => resolve(false)).end();
});

/** The p50 (ms) of `n` GETs of each, alternated one by one. */
async function alternated(direct, routed, n) {
  const d = [];
  const r = [];
  for (let i = 0; i < n; i++) {
    let t = performance.now();
    await direct();
    d.push(performance.now() - t);
    t = performance.now();
    await routed();
    r.push(performance.now() - t);
  }
  return { direct: median(d), routed: median(r) };
}

/** Requests completed through `port` in `ms` with `connections` kept-alive connections busy. */
async function load(port, connections, ms) {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  let done = 0;
  const until = performance.now() + ms;
  await Promise.all(Array.from({ length: connections }, async () => {
    while (performance.now() < until) {
      await get(agent, port);
      done++;
    }
  }));
  agent.destroy();
  return done;
}

export async function routerFigures({ samples = 5, requests = 2000, loadMs = 4000, connections = 32 } = {}) {
  if (!existsSync(ROUTER)) throw new Error(`${ROUTER} is missing: run pnpm build (or pnpm bundle:router)`);
  const routes = await routesServer(100);
  const [appPort, listenPort, healthPort] = [await freePort(), await freePort(), await freePort()];
  const app = child(["-e", `require("http").createServer((q, s) => { s.setHeader("content-type", "application/json"); s.end('{"app":"baseline"}'); }).listen(${appPort}, "127.0.0.1")`], {});
  const router = child([ROUTER], {
    LOG_LEVEL: "warn",
    EPHEMERA_ROUTER_WORKLOAD: `${WORKLOAD.kind}/${WORKLOAD.namespace}/${WORKLOAD.name}`,
    EPHEMERA_ROUTER_PORTS: `${appPort}:${listenPort}`,
    EPHEMERA_ROUTES: `127.0.0.1:${routes.port}`,
    EPHEMERA_ROUTER_HEALTH_LISTEN: `127.0.0.1:${healthPort}`,
  });
  try {
    await waitFor(() => answers(appPort, "/"), { timeoutMs: 15_000, what: "the app listening" });
    await waitFor(() => answers(healthPort, "/healthz"),
      { timeoutMs: 15_000, what: "the router ready" }).catch((err) => {
      throw new Error(`${err.message}; it said: ${router.output()}`);
    });
    const directAgent = new Agent({ keepAlive: true, maxSockets: 1 });
    const routedAgent = new Agent({ keepAlive: true, maxSockets: 1 });
    const direct = () => get(directAgent, appPort);
    const routed = () => get(routedAgent, listenPort);
    await alternated(direct, routed, 500); // warm-up: JIT, connections
    const added = [];
    const p50 = { direct: [], routed: [] };
    for (let i = 0; i < samples; i++) {
      const s = await alternated(direct, routed, requests);
      added.push(s.routed - s.direct);
      p50.direct.push(s.direct);
      p50.routed.push(s.routed);
    }
    directAgent.destroy();
    routedAgent.destroy();

    await load(listenPort, connections, 1000); // warm-up
    const before = procUsage(router.proc.pid);
    const t0 = performance.now();
    const done = await load(listenPort, connections, loadMs);
    const seconds = (performance.now() - t0) / 1000;
    const cpuMs = procUsage(router.proc.pid).cpuMs - before.cpuMs;
    return {
      samples, requests, connections, goals: GOALS,
      addedP50Ms: added, directP50Ms: p50.direct, routedP50Ms: p50.routed,
      requestsPerSecond: done / seconds,
      routerCpuMsPerRequest: cpuMs / done,
      routerCpuShare: cpuMs / 1000 / seconds,
      peakRssMb: procUsage(router.proc.pid).peakRssMb,
    };
  } finally {
    router.proc.kill("SIGTERM");
    app.proc.kill("SIGTERM");
    routes.stop();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const r = await routerFigures({ samples: Number(process.argv[2] ?? 5) });
  const ms = (xs) => `min ${Math.min(...xs).toFixed(3)} / median ${median(xs).toFixed(3)} ms`;
  process.stdout.write(
    `ephemera-router, ${r.samples} samples of ${r.requests} GETs each way (node ${process.version}):\n` +
    `  p50 direct             ${ms(r.directP50Ms)}\n` +
    `  p50 through the router ${ms(r.routedP50Ms)}\n` +
    `  added by the router    ${ms(r.addedP50Ms)}   goal ≤ ${GOALS.addedP50Ms} ms: ${median(r.addedP50Ms) <= GOALS.addedP50Ms ? "met" : "missed"}\n` +
    `  load, ${r.connections} connections: ${r.requestsPerSecond.toFixed(0)} requests/s, router CPU ${(r.routerCpuShare * 100).toFixed(0)} % of a core, ` +
    `${r.routerCpuMsPerRequest.toFixed(3)} ms per request (${(1000 / r.routerCpuMsPerRequest).toFixed(0)} requests/s per core)   goal ≥ ${GOALS.requestsPerSecond}/s: ` +
    `${r.requestsPerSecond >= GOALS.requestsPerSecond ? "met" : "missed"}\n` +
    `  router peak RSS ${r.peakRssMb.toFixed(0)} MB\n`,
  );
}
