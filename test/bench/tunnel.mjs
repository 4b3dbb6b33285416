// What the tunnel (ephemera's workstation ⇄ cluster link) costs: the built tunnel service
// (services/tunnel/dist startTunnel) and its client (@ephemera/tunnel/client, a TunnelClient)
// in this process on loopback, serving one local workload whose toLocal is a small HTTP/1.1
// server in a process of its own (with a TCP echo server beside it, a cluster Service's
// stand-in). The tunnel asks the real sandbox API (SandboxCore on in-memory stores behind
// apiServices, in this process, without tokens) who may serve what; its audit events go to
// the JetStream of the NATS given (run.mjs's own). The caller, the tunnel and the client share
// this process's event loop: their work adds up where two machines would overlap it, and no
// network lies between them, so the figures are what the tunnel's code costs, not a link's.
//   new connection: GETs each on a TCP connection of its own to the tunnel's listener for the
//                   local (as a sandbox's request through a router arrives), alternated one by
//                   one with the same GET straight to the server; p50 of each, and what the
//                   tunnel adds (p50 through − p50 direct), per sample.          Goal: ≤ 2 ms.
//   kept-alive:     the same on one kept-alive connection each way.              Goal: ≤ 1 ms.
//   throughput:     one 64 MiB GET through the tunnel against the same direct, alternated;
//                   time through ÷ time direct.              Goal: ≤ 2× (≥ half the throughput).
//   dial:           workstation → cluster: TunnelClient.dial to the echo server, one 4-byte
//                   round trip, against net.connect and the same round trip.      Goal: ≤ 2 ms.
//   node test/bench/tunnel.mjs [samples [requests]]   (after pnpm build; starts a NATS of its own)
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { Agent, request } from "node:http";
import { connect } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as pb from "../../services/proto/dist/index.js";
import {
  InMemoryEventStore, InMemoryLogStore, InMemoryValueStore, JetStreamEventStore, connectNats,
} from "../../services/eventstore/dist/index.js";
import { createLogger, startGrpcServer, waitFor } from "../../services/kit/dist/index.js";
import { SandboxCore } from "../../services/sandbox/dist/index.js";
import { apiServices } from "../../services/sandbox/dist/api.js";
import { DEFAULT_LIVENESS, apiAuthorizer, startTunnel } from "../../services/tunnel/dist/index.js";
import { TunnelClient } from "../../services/tunnel/dist/client.js";
import { newPrefix, startServers, stopAll } from "./system.mjs";

export const GOALS = { addedNewConnectionMs: 2, addedKeptAliveMs: 1, largeTimeRatio: 2, addedDialMs: 2 };
const MiB = 2 ** 20;

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

// The workstation's servers: GET /big/<n> answers n MiB, any other GET a small JSON body;
// the echo server sends back what it reads. Prints their ports as one JSON line.
const WORKSTATION = `
const http = require("http"), net = require("net");
const chunk = Buffer.alloc(${MiB}, 120);
const app = http.createServer((q, s) => {
  const big = /^\\/big\\/(\\d+)$/.exec(q.url);
  if (!big) { s.setHeader("content-type", "application/json"); s.end('{"app":"local"}'); return; }
  let left = Number(big[1]);
  s.setHeader("content-length", left * chunk.length);
  const more = () => { while (left > 0) { left--; if (!s.write(chunk)) { s.once("drain", more); return; } } s.end(); };
  more();
});
const echo = net.createServer((c) => { c.on("error", () => {}); c.pipe(c); });
Promise.all([app, echo].map((s) => new Promise((r) => s.listen(0, "127.0.0.1", r))))
  .then(() => console.log(JSON.stringify({ http: app.address().port, echo: echo.address().port })));
`;

function workstationServers() {
  const proc = spawn(process.execPath, ["-e", WORKSTATION], { env: { PATH: process.env.PATH }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  proc.stderr.on("data", (d) => (out += d));
  const ports = new Promise((resolve, reject) => {
    proc.stdout.once("data", (d) => resolve(JSON.parse(String(d))));
    proc.once("exit", (code) => reject(new Error(`the workstation's servers exited (${code}): ${out}`)));
  });
  return { proc, ports };
}

/** GET `path` on `port`; resolves with the body's length once it has all arrived. */
const get = (port, path, agent) => new Promise((resolve, reject) => {
  const req = request({ host: "127.0.0.1", port, path, agent }, (res) => {
    let bytes = 0;
    res.on("data", (d) => (bytes += d.length));
    res.on("end", () => (res.statusCode === 200 ? resolve(bytes) : reject(new Error(`status ${res.statusCode} from port ${port}`))));
    res.on("error", reject);
  });
  req.on("error", reject);
  req.end();
});

/** Writes "ping" on a connected duplex, waits for it back, then ends it and waits for it to close (untimed). */
async function roundTrip(open) {
  const t = performance.now();
  const stream = await open();
  await new Promise((resolve, reject) => {
    let got = "";
    stream.on("error", reject);
    stream.on("data", (d) => { got += d; if (got === "ping") resolve(); });
    stream.write("ping");
  });
  const ms = performance.now() - t;
  const closed = new Promise((resolve) => stream.once("close", resolve));
  stream.end();
  await closed;
  return ms;
}

const connected = (port) => new Promise((resolve, reject) => {
  const socket = connect(port, "127.0.0.1");
  socket.once("connect", () => resolve(socket)).once("error", reject);
});

/** `n` of each, alternated one by one (load from elsewhere falls on both alike); each call resolves to its own time or is timed here. */
async function alternated(direct, through, n) {
  const d = [];
  const r = [];
  const timed = async (fn) => {
    const t = performance.now();
    const own = await fn();
    return typeof own === "number" && fn.timesItself ? own : performance.now() - t;
  };
  for (let i = 0; i < n; i++) {
    d.push(await timed(direct));
    r.push(await timed(through));
  }
  return { direct: d, through: r };
}
const selfTimed = (fn) => Object.assign(fn, { timesItself: true });

/** `samples` rounds of `n`: per round the p50 of each and the difference. */
async function p50s(direct, through, n, samples) {
  await alternated(direct, through, Math.min(200, n)); // warm-up: JIT, connections
  const out = { direct: [], through: [], added: [] };
  for (let i = 0; i < samples; i++) {
    const s = await alternated(direct, through, n);
    out.direct.push(median(s.direct));
    out.through.push(median(s.through));
    out.added.push(median(s.through) - median(s.direct));
  }
  return out;
}

/** The tunnel, the API it asks and a connected client serving one local whose toLocal is `toLocal`. */
async function tunnelWorld(natsUrl, toLocal) {
  const logger = createLogger("bench-tunnel", "warn");
  const nc = await connectNats(natsUrl, "bench-tunnel");
  const store = await JetStreamEventStore.open(nc, { prefix: newPrefix("tun"), logger });
  const core = new SandboxCore({
    store: new InMemoryEventStore(), logs: new InMemoryLogStore(), values: new InMemoryValueStore(), logger,
    previewDomain: "preview.bench", routingKey: () => "rkbenchtunnel",
  });
  await core.start();
  const api = await startGrpcServer("127.0.0.1:0", apiServices(core, logger), logger);
  const authorizer = apiAuthorizer(`127.0.0.1:${api.port}`, undefined);
  const tunnel = await startTunnel({
    listen: "127.0.0.1:0", podAddress: "127.0.0.1", refreshMs: 60_000, acceptTimeoutMs: 10_000, dns: [], name: "bench", liveness: DEFAULT_LIVENESS,
  }, { store, logger, authorize: authorizer.authorize });
  const applied = await core.applySandbox(pb.Sandbox.fromJSON({
    name: "bench", spec: { cluster: "local", local: [{ name: "app", from: { kind: "Deployment", namespace: "bench", name: "app" }, mappings: [{ port: 8080, toLocal }] }] },
  }));
  const routingKey = applied.sandbox.routingKey;
  const client = await TunnelClient.connect({ address: tunnel.address, sandboxes: ["bench"], client: "ephemera-bench" });
  // The listener's address, as the cluster learns it: from the local's connected event.
  const event = await waitFor(async () => (await store.read("locals", routingKey)).events
    .find((e) => e.type === "ephemera.locals.connected.v1" && e.data.sessionId === client.sessionId), { timeoutMs: 10_000, what: "the local connected" });
  const address = event.data.addresses.find((a) => a.port === 8080).address;
  return {
    client, listenerPort: Number(address.slice(address.lastIndexOf(":") + 1)),
    async stop() {
      await client.close();
      await tunnel.stop();
      authorizer.close();
      await api.shutdown();
      await core.stop();
      await nc.close();
    },
  };
}

export async function tunnelFigures({ natsUrl, samples = 5, requests = 500, largeMiB = 64, largeSamples = samples, dials = requests } = {}) {
  const servers = workstationServers();
  let world;
  try {
    const ports = await servers.ports;
    world = await tunnelWorld(natsUrl, `127.0.0.1:${ports.http}`);
    const { client, listenerPort } = world;

    const fresh = await p50s(() => get(ports.http, "/orders/1", false), () => get(listenerPort, "/orders/1", false), requests, samples);

    const [directAgent, throughAgent] = [new Agent({ keepAlive: true, maxSockets: 1 }), new Agent({ keepAlive: true, maxSockets: 1 })];
    const kept = await p50s(() => get(ports.http, "/orders/1", directAgent), () => get(listenerPort, "/orders/1", throughAgent), requests, samples);
    directAgent.destroy();
    throughAgent.destroy();

    const large = `/big/${largeMiB}`;
    const check = async (port) => {
      const bytes = await get(port, large, false);
      if (bytes !== largeMiB * MiB) throw new Error(`GET ${large} on port ${port} gave ${bytes} bytes, not ${largeMiB * MiB}`);
    };
    const big = await alternated(() => check(ports.http), () => check(listenerPort), largeSamples + 1);
    big.direct.shift(); // warm-up
    big.through.shift();

    const dial = await p50s(selfTimed(() => roundTrip(() => connected(ports.echo))), selfTimed(() => roundTrip(() => client.dial("127.0.0.1", ports.echo))), dials, samples);

    const stats = client.stats();
    return { samples, requests, largeMiB, dials, goals: GOALS, fresh, kept, big, dial, connections: stats.connections };
  } finally {
    await world?.stop();
    servers.proc.kill("SIGTERM");
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const scratch = mkdtempSync("/var/tmp/ephemera-bench-tunnel-");
  try {
    const { natsUrl } = await startServers(join(scratch, "servers"));
    const r = await tunnelFigures({ natsUrl, samples: Number(process.argv[2] ?? 5), requests: Number(process.argv[3] ?? 500) });
    const ms = (xs) => `min ${Math.min(...xs).toFixed(3)} / median ${median(xs).toFixed(3)} ms`;
    const met = (x, goal) => (x <= goal ? "met" : "missed");
    const mibs = (times) => ((r.largeMiB * 1000) / median(times)).toFixed(0);
    const ratio = median(r.big.through) / median(r.big.direct);
    process.stdout.write(
      `ephemera tunnel, ${r.samples} samples of ${r.requests} GETs and ${r.dials} dials each way (node ${process.version}):\n` +
      `  new connection: p50 direct ${ms(r.fresh.direct)}, through ${ms(r.fresh.through)}\n` +
      `                  added ${ms(r.fresh.added)}   goal ≤ ${GOALS.addedNewConnectionMs} ms: ${met(median(r.fresh.added), GOALS.addedNewConnectionMs)}\n` +
      `  kept-alive:     p50 direct ${ms(r.kept.direct)}, through ${ms(r.kept.through)}\n` +
      `                  added ${ms(r.kept.added)}   goal ≤ ${GOALS.addedKeptAliveMs} ms: ${met(median(r.kept.added), GOALS.addedKeptAliveMs)}\n` +
      `  ${r.largeMiB} MiB GET:    direct ${ms(r.big.direct)} (${mibs(r.big.direct)} MiB/s), through ${ms(r.big.through)} (${mibs(r.big.through)} MiB/s)\n` +
      `                  time through ÷ direct ${ratio.toFixed(2)}×   goal ≤ ${GOALS.largeTimeRatio}×: ${met(ratio, GOALS.largeTimeRatio)}\n` +
      `  dial + round trip: p50 direct ${ms(r.dial.direct)}, through ${ms(r.dial.through)}\n` +
      `                  added ${ms(r.dial.added)}   goal ≤ ${GOALS.addedDialMs} ms: ${met(median(r.dial.added), GOALS.addedDialMs)}\n` +
      `  connections through the tunnel: ${r.connections}\n`,
    );
  } finally {
    await stopAll();
    rmSync(scratch, { recursive: true, force: true });
  }
}
