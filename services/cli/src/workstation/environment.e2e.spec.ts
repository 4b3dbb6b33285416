// `eph sandbox get-env` and `get-files` as a user runs them: the built binary, a real ephemera
// core, the tunnel reading a kube-sim (the baseline Deployment, its ConfigMap and Secret), and
// `eph local connect` in the background. Connected, the baseline's env comes first with the
// Secret's value and the sandbox's customizations on top; disconnected, today's output.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { AppsV1Api, CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { createLogger } from "@ephemera/kit";
import { startKubeSim, type KubeSim } from "@ephemera/kube-sim";
import { apiAuthorizer, kubeEnvironment, startTunnel, type RunningTunnel } from "@ephemera/tunnel";
import { startCore, type Core } from "../../../../test/support/core.js";
import { alive, readState } from "./state.js";

const MAIN = join(__dirname, "..", "..", "dist", "bundle", "main.js");
const namespace = `shop-${process.pid}`;
const password = `pw-${randomBytes(12).toString("hex")}`;

let core: Core;
let sim: KubeSim;
let tunnel: RunningTunnel;
let authorizer: ReturnType<typeof apiAuthorizer>;
let home: string;
let routingKey = "";

function eph(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [MAIN, ...args], {
      env: { ...process.env, EPHEMERA_API: core.address, EPHEMERA_HOME: home, EPHEMERA_TUNNEL: tunnel.address },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.on("close", (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

const SANDBOX = `
name: dev
spec:
  cluster: local
  local:
  - name: api
    from: {kind: Deployment, namespace: ${namespace}, name: api}
    mappings: [{port: 8080, toLocal: "127.0.0.1:18080"}]
    env:
    - {name: LOG_LEVEL, value: trace}
    - {name: FEATURE, operation: delete}
    - {name: TOKEN, valueFrom: {secret: {name: api-secrets, key: token}}}
    files:
    - {path: /etc/api/mode, valueFrom: {configMap: {name: api-config, key: MODE}}}
`;

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "eph-env-e2e-"));
  sim = await startKubeSim({ listen: "127.0.0.1:0", kubeconfigPath: join(home, "kubeconfig"), runtime: "process" });
  const kc = new KubeConfig();
  kc.loadFromFile(sim.kubeconfigPath);
  const k8s = kc.makeApiClient(CoreV1Api);
  await k8s.createNamespace({ body: { metadata: { name: namespace } } });
  await k8s.createNamespacedConfigMap({ namespace, body: { metadata: { name: "api-config" }, data: { LOG_LEVEL: "info", MODE: "blue" } } });
  await k8s.createNamespacedSecret({ namespace, body: { metadata: { name: "api-secrets" }, stringData: { db: password, token: "tok-1" } } });
  await kc.makeApiClient(AppsV1Api).createNamespacedDeployment({
    namespace,
    body: {
      metadata: { name: "api" },
      spec: {
        replicas: 0, selector: { matchLabels: { app: "api" } },
        template: {
          metadata: { labels: { app: "api" } },
          spec: {
            containers: [{
              name: "api", image: "api:1", ports: [{ containerPort: 8080 }],
              envFrom: [{ configMapRef: { name: "api-config" } }],
              env: [
                { name: "FEATURE", value: "on" },
                { name: "DB_PASSWORD", valueFrom: { secretKeyRef: { name: "api-secrets", key: "db" } } },
              ],
            }],
          },
        },
      },
    },
  });
  core = await startCore();
  authorizer = apiAuthorizer(core.address, undefined);
  tunnel = await startTunnel({
    listen: "127.0.0.1:0", podAddress: "127.0.0.1", refreshMs: 500, acceptTimeoutMs: 5_000, dns: [], name: "tunnel-env-e2e",
    liveness: { intervalMs: 200, timeoutMs: 1_000 },
  }, { store: core.store, authorize: authorizer.authorize, logger: createLogger("tunnel-env-e2e", "warn"), readEnvironment: kubeEnvironment(kc) });
  const applied = await eph(["sandbox", "apply", "-f", core.file("sb.yaml", SANDBOX)]);
  expect(applied.stderr).toBe("");
  routingKey = JSON.parse((await eph(["sandbox", "get", "dev", "-o", "json"])).stdout).routingKey as string;
}, 60_000);

afterAll(async () => {
  const pid = readState(join(home, "local"))?.pid;
  if (pid && alive(pid)) await eph(["local", "disconnect"]);
  await tunnel?.stop();
  authorizer?.close();
  await core?.stop();
  await sim?.stop();
  rmSync(home, { recursive: true, force: true });
});

it("without eph local connect: the sandbox's own values, and what only the cluster has named on stderr", async () => {
  const r = await eph(["sandbox", "get-env", "dev", "--local", "api"]);
  expect(r).toEqual({
    code: 0,
    stdout: `SIGNADOT_SANDBOX_NAME=dev\nSIGNADOT_SANDBOX_ROUTING_KEY=${routingKey}\nLOG_LEVEL=trace\n`,
    stderr: `not included: the env of the baseline Deployment ${namespace}/api (eph local connect is not running)\n`
      + "not set: env TOKEN: from Secret api-secrets key token, which only the cluster has (eph local connect resolves it)\n",
  });
});

it("connected: the baseline's env with its Secret's value first, the customizations on top; the files from the cluster", async () => {
  const connected = await eph(["local", "connect", "--no-proxies"]);
  expect(connected.code).toBe(0);
  const r = await eph(["sandbox", "get-env", "dev", "--local", "api"]);
  expect(r).toEqual({
    code: 0, stderr: "",
    stdout: `MODE=blue\nDB_PASSWORD=${password}\nSIGNADOT_SANDBOX_NAME=dev\nSIGNADOT_SANDBOX_ROUTING_KEY=${routingKey}\nLOG_LEVEL=trace\nTOKEN=tok-1\n`,
  });
  const files = join(home, "files");
  const written = await eph(["sandbox", "get-files", "dev", "--local", "api", "--dir", files]);
  expect(written).toEqual({ code: 0, stdout: `${join(files, "etc/api/mode")}\n`, stderr: "" });
  expect(readFileSync(join(files, "etc/api/mode"), "utf8")).toBe("blue");
  expect(statSync(join(files, "etc/api/mode")).mode & 0o777).toBe(0o600);
  // --no-cluster: as if not connected, without asking the daemon.
  const without = await eph(["sandbox", "get-env", "dev", "--local", "api", "--no-cluster"]);
  expect(without.stdout).toBe(`SIGNADOT_SANDBOX_NAME=dev\nSIGNADOT_SANDBOX_ROUTING_KEY=${routingKey}\nLOG_LEVEL=trace\n`);
  expect((await eph(["local", "disconnect"])).code).toBe(0);
}, 60_000);
