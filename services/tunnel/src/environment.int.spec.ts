// `POST /v1/environment` on real servers: the real API (LocalService.Serve over the sandbox
// core), the tunnel on the shared NATS JetStream, and a kube-sim holding the baseline
// Deployment, its ConfigMap and Secret, and a forked workload's Service. Asserts the
// resolved environment, who may ask, the tunnel without a cluster, and that the Secret's
// value is in the answer and nowhere else (log lines, events).
import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { AppsV1Api, CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { Aggregates } from "@ephemera/events";
import { createLogger, forkName } from "@ephemera/kit";
import { startKubeSim, type KubeSim } from "@ephemera/kube-sim";
import * as pb from "@ephemera/proto";
import { TunnelClient, TunnelRefused } from "./client.js";
import { kubeEnvironment } from "./server/kube-environment.js";
import { startWorld, type TunnelWorld } from "./tunnel.testkit.js";

const namespace = `env-${process.pid}`;
const password = `pw-${randomBytes(12).toString("hex")}`;

/** The baseline: a sidecar first, then the container that owns port 8080, whose env uses every source. */
const backend = {
  metadata: { name: "backend" },
  spec: {
    replicas: 0,
    selector: { matchLabels: { app: "backend" } },
    template: {
      metadata: { labels: { app: "backend", tier: "api" } },
      spec: {
        serviceAccountName: "backend-sa",
        containers: [
          { name: "sidecar", image: "proxy:1", env: [{ name: "SIDECAR_ONLY", value: "x" }] },
          {
            name: "app", image: "backend:1", ports: [{ containerPort: 8080 }],
            envFrom: [{ configMapRef: { name: "backend-config" }, prefix: "CFG_" }, { secretRef: { name: "absent", optional: true } }],
            env: [
              { name: "PLAIN", value: "plain" },
              { name: "GREETING", value: "hello $(PLAIN) $(UNSET)" },
              { name: "DB_PASSWORD", valueFrom: { secretKeyRef: { name: "backend-secret", key: "password" } } },
              { name: "LOG_LEVEL", valueFrom: { configMapKeyRef: { name: "backend-config", key: "LOG_LEVEL" } } },
              { name: "MAYBE", valueFrom: { secretKeyRef: { name: "backend-secret", key: "nope", optional: true } } },
              { name: "MISSING", valueFrom: { configMapKeyRef: { name: "backend-config", key: "nope" } } },
              { name: "NS", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
              { name: "TIER", valueFrom: { fieldRef: { fieldPath: "metadata.labels['tier']" } } },
              { name: "SA", valueFrom: { fieldRef: { fieldPath: "spec.serviceAccountName" } } },
              { name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
            ],
          },
        ],
      },
    },
  },
};

const cart = {
  metadata: { name: "cart" },
  spec: {
    replicas: 0, selector: { matchLabels: { app: "cart" } },
    template: { metadata: { labels: { app: "cart" } }, spec: { containers: [{ name: "cart", image: "cart:1" }] } },
  },
};

/** A sandbox forking cart, with a local for backend whose customizations read the cluster. */
const sandbox = (name: string) => pb.Sandbox.fromJSON({
  name,
  spec: {
    cluster: "local",
    forks: [{ forkOf: { kind: "Deployment", namespace, name: "cart" } }],
    local: [{
      name: "backend", from: { kind: "Deployment", namespace, name: "backend" }, mappings: [{ port: 8080, toLocal: "127.0.0.1:18080" }],
      env: [
        { name: "LOG_LEVEL", value: "trace" },
        { name: "TOKEN", valueFrom: { secret: { name: "backend-secret", key: "password" } } },
        { name: "CART_URL", valueFrom: { fork: { forkOf: { kind: "Deployment", namespace, name: "cart" }, expression: "http://{{ .Service.Host }}:{{ .Service.Port }}" } } },
        { name: "OPTIONAL", valueFrom: { configMap: { name: "nowhere", key: "k", optional: true } } },
      ],
      files: [{ path: "/etc/backend/mode", valueFrom: { configMap: { name: "backend-config", key: "MODE" } } }],
    }],
  },
});

describe("a local workload's environment from the cluster", () => {
  let sim: KubeSim;
  let world: TunnelWorld;
  const logged: string[] = [];
  beforeAll(async () => {
    sim = await startKubeSim({ listen: "127.0.0.1:0", kubeconfigPath: join(mkdtempSync(join(tmpdir(), "tunnel-env-")), "kubeconfig"), runtime: "process" });
    const kc = new KubeConfig();
    kc.loadFromFile(sim.kubeconfigPath);
    const core = kc.makeApiClient(CoreV1Api);
    const apps = kc.makeApiClient(AppsV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: "backend-config" }, data: { LOG_LEVEL: "debug", MODE: "blue" } } });
    await core.createNamespacedSecret({ namespace, body: { metadata: { name: "backend-secret" }, stringData: { password } } });
    await apps.createNamespacedDeployment({ namespace, body: backend });
    await apps.createNamespacedDeployment({ namespace, body: cart });
    await core.createNamespacedService({ namespace, body: { metadata: { name: "cart" }, spec: { selector: { app: "cart" }, ports: [{ port: 9090 }] } } });
    // Every line the tunnel logs, at every level, kept to search for the Secret's value.
    const lines = new Writable({ write(chunk: Buffer, _encoding, done) { logged.push(chunk.toString()); done(); } });
    world = await startWorld({ readEnvironment: kubeEnvironment(kc), logger: createLogger("tunnel-test", "trace", lines) });
  });
  afterAll(async () => {
    await world?.stop();
    await sim?.stop();
  });
  const connect = (sandboxes: string[]) => TunnelClient.connect({ address: world.tunnel.address, sandboxes, client: "eph/test env" });

  it("answers the baseline container's env resolved from its ConfigMap and Secret, and the local's cluster-only values", async () => {
    const applied = await world.core.applySandbox(sandbox("env-a"));
    const routingKey = applied.sandbox!.routingKey;
    const client = await connect(["env-a"]);
    try {
      const environment = await client.environment("env-a", "backend");
      expect(environment).toEqual({
        sandbox: "env-a", local: "backend",
        baseline: { kind: "Deployment", namespace, name: "backend", container: "app" },
        env: [
          { name: "CFG_LOG_LEVEL", value: "debug" },
          { name: "CFG_MODE", value: "blue" },
          { name: "PLAIN", value: "plain" },
          { name: "GREETING", value: "hello plain $(UNSET)" },
          { name: "DB_PASSWORD", value: password },
          { name: "LOG_LEVEL", value: "debug" },
          { name: "NS", value: namespace },
          { name: "TIER", value: "api" },
          { name: "SA", value: "backend-sa" },
        ],
        values: {
          env: [{ name: "TOKEN", value: password }, { name: "CART_URL", value: `http://${forkName("cart", routingKey)}.${namespace}.svc:9090` }],
          files: [{ path: "/etc/backend/mode", value: Buffer.from("blue").toString("base64") }],
        },
        unresolved: [
          `env MISSING: ConfigMap ${namespace}/backend-config has no key nope (the baseline's pods would not start either)`,
          "env POD_IP: fieldRef status.podIP is the pod's own address, which a local process does not have",
        ],
      });
    } finally {
      await client.close();
    }
  });

  it("refuses a local the session does not serve (403) and a request that names none (400)", async () => {
    await world.core.applySandbox(sandbox("env-b"));
    await world.core.applySandbox(sandbox("env-c"));
    const client = await connect(["env-b"]);
    try {
      const other = await client.environment("env-c", "backend").catch((err: unknown) => err) as TunnelRefused;
      expect(other).toBeInstanceOf(TunnelRefused);
      expect([other.status, other.reason]).toEqual([403, `session ${client.sessionId} does not serve local backend of sandbox env-c (it serves: env-b/backend)`]);
      const unknown = await client.environment("env-b", "frontend").catch((err: unknown) => err) as TunnelRefused;
      expect([unknown.status, unknown.reason]).toEqual([403, `session ${client.sessionId} does not serve local frontend of sandbox env-b (it serves: env-b/backend)`]);
      const unnamed = await client.environment("env-b", "").catch((err: unknown) => err) as TunnelRefused;
      expect([unnamed.status, unnamed.reason]).toEqual([400, "local must be the name of a local workload of the sandbox (spec.local[].name)"]);
    } finally {
      await client.close();
    }
  });

  it("never puts the Secret's value in a log line or an event", async () => {
    await world.core.applySandbox(sandbox("env-d"));
    const client = await connect(["env-d"]);
    const sessionId = client.sessionId;
    const routingKey = client.serving[0]!.routingKey;
    expect((await client.environment("env-d", "backend")).values.env).toContainEqual({ name: "TOKEN", value: password });
    await client.close();
    await world.waitForEvent(Aggregates.tunnel, sessionId, "ephemera.tunnel.session_closed.v1");
    const read = logged.find((l) => l.includes(sessionId) && l.includes("environment of a local workload read"));
    expect(JSON.parse(read!)).toMatchObject({ sandbox: "env-d", local: "backend", baseline: `Deployment ${namespace}/backend`, variables: 9, customized: 3, unresolved: 2 });
    expect(logged.filter((l) => l.includes(password))).toEqual([]);
    const events = [...await world.events(Aggregates.tunnel, sessionId), ...await world.events(Aggregates.locals, routingKey)];
    expect(events.length).toBeGreaterThan(1);
    expect(events.filter((e) => JSON.stringify(e.data).includes(password))).toEqual([]);
  });
});

describe("a tunnel that sees no cluster", () => {
  let world: TunnelWorld;
  beforeAll(async () => { world = await startWorld(); });
  afterAll(async () => { await world?.stop(); });

  it("answers 501 saying it cannot see a cluster", async () => {
    await world.sandboxWithLocal("env-none", "127.0.0.1:18080");
    const client = await TunnelClient.connect({ address: world.tunnel.address, sandboxes: ["env-none"] });
    try {
      const refused = await client.environment("env-none", "backend").catch((err: unknown) => err) as TunnelRefused;
      expect(refused).toBeInstanceOf(TunnelRefused);
      expect([refused.status, refused.reason]).toEqual([501, "the tunnel cannot see a cluster (it runs without a kubeconfig): the baseline's environment cannot be read here"]);
    } finally {
      await client.close();
    }
  });
});
