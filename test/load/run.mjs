// pnpm test:load: is the API still responsive while steps run? Starts the whole stack
// (pnpm start's supervisor, process driver) under its own prefix and ports, keeps
// sandboxes whose steps burn CPU being created and deleted, and meanwhile sends API calls
// (Get, List, plugin List) at a fixed rate. Prints the errors and the p50/p99 latency.
// Bounded: LOAD_SECONDS (default 60) at LOAD_RATE calls/s (default 200).
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as pb from "../../services/proto/dist/index.js";
import { grpc, clientOptions, checkHealth } from "../../services/kit/dist/index.js";

const SECONDS = Number(process.env.LOAD_SECONDS ?? 60);
const RATE = Number(process.env.LOAD_RATE ?? 200);
const DEADLINE_MS = 1000;
const prefix = `load${randomBytes(4).toString("hex")}`;
const freePort = () => new Promise((resolve) => { const s = createServer(); s.listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => resolve(p)); }); });
const [apiPort, ioPort] = [await freePort(), await freePort()];
const api = `127.0.0.1:${apiPort}`;
const scratch = mkdtempSync(join(tmpdir(), `${prefix}-`));

const stack = spawn(process.execPath, ["services/stack/dist/main.js"], {
  env: { ...process.env, EPHEMERA_PREFIX: prefix, EPHEMERA_API_LISTEN: api, EPHEMERA_IOCONTEXT_LISTEN: `127.0.0.1:${ioPort}`, EPHEMERA_LOG_FORMAT: "json", LOG_LEVEL: "warn", EPHEMERA_ROUTES_LISTEN: "127.0.0.1:0", EPHEMERA_ROUTES_HTTP_LISTEN: "127.0.0.1:0", EPHEMERA_GATEWAY_LISTEN: "127.0.0.1:0", EPHEMERA_JOBS_LISTEN: "127.0.0.1:0", EPHEMERA_CONSOLE_LISTEN: "127.0.0.1:0" },
  stdio: ["ignore", "ignore", "inherit"],
});
const stop = async () => { stack.kill("SIGTERM"); await new Promise((r) => stack.once("exit", r)); rmSync(scratch, { recursive: true, force: true }); };
try {
  const up = Date.now() + 30_000;
  while (!(await checkHealth(api))) { if (Date.now() > up) throw new Error("the stack did not come up in 30 s"); }

  const creds = grpc.credentials.createInsecure();
  const plugins = new pb.ResourcePluginServiceClient(api, creds, clientOptions);
  const sandboxes = new pb.SandboxServiceClient(api, creds, { ...clientOptions, channelOverride: plugins.getChannel() });
  const unary = (client, method, req, deadline = Date.now() + DEADLINE_MS) =>
    new Promise((resolve, reject) => client[method](req, new grpc.Metadata(), { deadline }, (err, res) => (err ? reject(err) : resolve(res))));

  // Steps that keep the CPU busy for about a second each.
  const burn = "#!/bin/sh\ni=0; while [ $i -lt 300000 ]; do i=$((i+1)); done\necho done > /tmp/out\n";
  const step = (name) => ({ name, script: burn, outputs: [{ name: "out", valueFromPath: "/tmp/out" }] });
  await unary(plugins, "apply", { plugin: pb.ResourcePlugin.fromPartial({ name: "burner@1.0.0", spec: { runner: { image: "x" }, create: [step("a"), step("b"), step("c")], delete: [step("z")] } }) }, Date.now() + 10_000);

  let n = 0;
  let churning = process.env.LOAD_CHURN !== "0";
  const churn = (async () => {
    while (churning) {
      const name = `s${n++}`;
      await unary(sandboxes, "apply", { sandbox: pb.Sandbox.fromPartial({ name, spec: { cluster: "local", resources: [{ name: "r", plugin: "burner" }] } }) }, Date.now() + 10_000).catch(() => undefined);
      // Keep about 6 sandboxes' steps going: delete the one 6 behind.
      if (n > 6) await unary(sandboxes, "delete", { name: `s${n - 7}`, force: false }, Date.now() + 10_000).catch(() => undefined);
      await new Promise((r) => setTimeout(r, 500));
    }
  })();

  const latencies = [];
  const errors = new Map();
  const calls = [
    () => unary(sandboxes, "get", { name: `s${Math.max(0, n - 1)}`, showOutputs: false }),
    () => unary(sandboxes, "list", {}),
    () => unary(plugins, "list", { pageSize: 100, pageToken: "", name: "" }),
  ];
  const started = Date.now();
  const inflight = new Set();
  for (let i = 0; i < SECONDS * RATE; i++) {
    const due = started + (i * 1000) / RATE;
    const wait = due - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const t = performance.now();
    const p = calls[i % calls.length]().then(
      () => latencies.push(performance.now() - t),
      (err) => {
        // NOT_FOUND for a sandbox just deleted is an answer, not an error.
        if (err.code === grpc.status.NOT_FOUND) latencies.push(performance.now() - t);
        else errors.set(err.code, (errors.get(err.code) ?? 0) + 1);
      },
    ).finally(() => inflight.delete(p));
    inflight.add(p);
  }
  await Promise.all(inflight);
  churning = false;
  await churn;
  latencies.sort((a, b) => a - b);
  const q = (x) => latencies[Math.min(latencies.length - 1, Math.floor(x * latencies.length))]?.toFixed(1);
  const failed = [...errors.values()].reduce((a, b) => a + b, 0);
  const byCode = [...errors].map(([code, count]) => `${grpc.status[code] ?? code}=${count}`).join(" ");
  console.log(`load: ${SECONDS} s at ${RATE} calls/s while ${n} sandboxes ran CPU-bound steps`);
  console.log(`calls ${SECONDS * RATE}, errors ${failed}${byCode ? ` (${byCode})` : ""}, p50 ${q(0.5)} ms, p99 ${q(0.99)} ms`);
  plugins.close();
} finally {
  await stop();
  const { connectNats } = await import("../../services/eventstore/dist/index.js");
  const { jetstreamManager } = await import("@nats-io/jetstream");
  const nc = await connectNats(process.env.NATS_URL ?? "nats://127.0.0.1:4222", "load-cleanup");
  const jsm = await jetstreamManager(nc);
  for await (const s of jsm.streams.list()) if (s.config.name.startsWith(`${prefix}_`)) await jsm.streams.delete(s.config.name);
  await nc.close();
}
