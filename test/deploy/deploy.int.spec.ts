// deploy/, the Dockerfile and the Tiltfile, checked without a cluster: both overlays render
// with kubectl's kustomize, every object validates against the Kubernetes OpenAPI schemas
// (kubernetes-models), the policy holds, the manifests apply to the simulated cluster, and
// the Tiltfile parses and names only paths that exist. Each check is also shown to fail on
// a broken input, so a pass means something.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { accessNotice } from "../../services/stack/src/stack.js";
import { webhookConfiguration } from "../../services/webhook/src/register/configuration.js";
import { kubectl, startSim, type Sim } from "../support/kube.js";
import { pinned, violations } from "./policy.js";

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const ROOT = join(__dirname, "..", "..");
const OVERLAYS = ["dev", "prod"] as const;

const render = (overlay: string) => execFileSync("kubectl", ["kustomize", join(ROOT, "deploy", "overlays", overlay)], { encoding: "utf8" });
const objects = (yaml: string) => parseAllDocuments(yaml).map((d) => d.toJSON() as Obj).filter(Boolean);
const validate = (yaml: string) => {
  const r = spawnSync(process.execPath, [join(__dirname, "validate.mjs"), "-"], { input: yaml, encoding: "utf8", cwd: ROOT });
  if (r.status !== 0) throw new Error(`validate.mjs exited ${r.status}: ${r.stderr}`);
  return r.stdout.trim().split("\n").map((l) => JSON.parse(l) as { kind: string; name: string; ok: boolean; error?: string });
};

describe("deploy/ rendered", () => {
  const rendered = Object.fromEntries(OVERLAYS.map((o) => [o, render(o)])) as Record<(typeof OVERLAYS)[number], string>;

  it.each(OVERLAYS)("%s renders every service, NATS, Redis and the runner's RBAC, in their namespaces", (overlay) => {
    const objs = objects(rendered[overlay]);
    const names = objs.map((o) => `${o["kind"]}/${o["metadata"].namespace ?? ""}/${o["metadata"].name}`);
    for (const s of ["sandbox", "scheduler", "runner", "iocontext", "webhook", "tunnel", "console", "redis"]) expect(names).toContain(`Deployment/ephemera-system/${s}`);
    // The console calls only the API, with each browser's token: no RBAC, no token of its own in the pod.
    expect(names.filter((n) => /Role.*console/.test(n))).toEqual([]);
    const consolePod = objs.find((o) => o["kind"] === "Deployment" && o["metadata"].name === "console")!["spec"].template.spec;
    expect(consolePod.automountServiceAccountToken).toBe(false);
    expect(objs.find((o) => o["kind"] === "Service" && o["metadata"].name === "console")!["spec"].ports).toEqual([{ name: "http", port: 80, targetPort: "console" }]);
    expect(names).toContain("StatefulSet/ephemera-system/nats");
    expect(names).toContain("Role/ephemera-runs/ephemera-runner");
    // Forks: the ClusterRole is granted per namespace by a RoleBinding, never cluster-wide.
    expect(names).toContain("ClusterRole//ephemera-forks");
    expect(names).toContain("RoleBinding/default/ephemera-forks");
    // The tunnel reads Services and Endpoints, and gets a local's baseline, ConfigMaps and Secrets by name,
    // only where a RoleBinding grants it, as the forks.
    expect(names).toContain("RoleBinding/default/ephemera-tunnel");
    const tunnel = objs.find((o) => o["kind"] === "ClusterRole" && o["metadata"].name === "ephemera-tunnel")!;
    expect(tunnel["rules"]).toEqual([
      { apiGroups: [""], resources: ["services", "endpoints"], verbs: ["get", "list", "watch"] },
      { apiGroups: ["apps"], resources: ["deployments", "statefulsets"], verbs: ["get"] },
      { apiGroups: ["argoproj.io"], resources: ["rollouts"], verbs: ["get"] },
      { apiGroups: [""], resources: ["configmaps", "secrets"], verbs: ["get"] },
    ]);
    // The one cluster-wide binding: the webhook's, to write the caBundle of its own configuration.
    expect(objs.filter((o) => o["kind"] === "ClusterRoleBinding").map((o) => [o["metadata"].name, o["roleRef"].name, o["subjects"]]))
      .toEqual([["ephemera-webhook", "ephemera-webhook", [{ kind: "ServiceAccount", name: "webhook", namespace: "ephemera-system" }]]]);
    expect(names).toContain("NetworkPolicy/ephemera-system/iocontext-ingress");
    const api = objs.find((o) => o["kind"] === "Service" && o["metadata"].name === "sandbox")!;
    expect(api["spec"].ports.map((p: Obj) => p.port)).toEqual([7400, 7777, 7778, 7779]); // the API, the Routes API, the JobAgent server
    // The job runner groups' pods reach the JobAgent server through that Service; only they and ephemera's services may.
    expect(names).toContain("NetworkPolicy/ephemera-system/sandbox-ingress");
    const jobsPolicy = objs.find((o) => o["kind"] === "NetworkPolicy" && o["metadata"].name === "sandbox-ingress")!;
    expect(jobsPolicy["spec"].ingress[0].ports).toEqual([{ protocol: "TCP", port: 7779 }]);
    expect(jobsPolicy["spec"].ingress[1].ports.map((p: Obj) => p["port"])).not.toContain(7779);
    // The forks' routes may also be Istio's: the runner may keep VirtualServices, and nothing else of Istio's.
    const forks = objs.find((o) => o["kind"] === "ClusterRole" && o["metadata"].name === "ephemera-forks")!;
    expect((forks["rules"] as Obj[]).filter((r) => r["apiGroups"].includes("networking.istio.io")))
      .toEqual([{ apiGroups: ["networking.istio.io"], resources: ["virtualservices"], verbs: ["get", "list", "create", "update", "delete"] }]);
    // A connected local workload's Endpoints, pointing at the tunnel, are the runner's to write and remove.
    expect((forks["rules"] as Obj[]).filter((r) => r["resources"].includes("endpoints")))
      .toEqual([{ apiGroups: [""], resources: ["endpoints"], verbs: ["get", "list", "create", "update", "delete"] }]);
    for (const binding of objs.filter((o) => o["kind"] === "RoleBinding")) {
      const account = binding["metadata"].name === "ephemera-tunnel" ? "tunnel" : "runner";
      expect(binding["subjects"]).toEqual([{ kind: "ServiceAccount", name: account, namespace: "ephemera-system" }]);
    }
    for (const d of objs.filter((o) => o["kind"] === "Deployment" && o["metadata"].name !== "redis")) {
      const c = d["spec"].template.spec.containers[0];
      if (d["metadata"].name === "webhook") expect(c.readinessProbe.httpGet).toEqual({ path: "/healthz", port: "webhook", scheme: "HTTPS" });
      // HTTP/2 only (h2c in the cluster): the kubelet's HTTP/1.1 probes cannot ask /healthz.
      else if (d["metadata"].name === "tunnel") expect(c.readinessProbe.tcpSocket).toEqual({ port: "tunnel" });
      else if (d["metadata"].name === "console") expect(c.readinessProbe.httpGet).toEqual({ path: "/healthz", port: "console" });
      else expect(c.readinessProbe.grpc.port).toBe(c.ports[0].containerPort);
      expect(d["spec"].template.metadata.annotations).toMatchObject({ "prometheus.io/scrape": "true", "prometheus.io/port": "9090" });
    }
  });

  it.each(OVERLAYS)("%s serves the Routes API as routeserver on 7777 (gRPC) and 7778 (HTTP), where Signadot's clients look for it: the sandbox service's pods", (overlay) => {
    const objs = objects(rendered[overlay]);
    const alias = objs.find((o) => o["kind"] === "Service" && o["metadata"].name === "routeserver")!;
    expect(alias["metadata"].namespace).toBe("ephemera-system");
    const sandbox = objs.find((o) => o["kind"] === "Deployment" && o["metadata"].name === "sandbox")!["spec"].template;
    // It selects the sandbox pods, and only them.
    expect(Object.entries(alias["spec"].selector as Record<string, string>).every(([k, v]) => sandbox.metadata.labels[k] === v)).toBe(true);
    const others = objs.filter((o) => o["kind"] === "Deployment" && o["metadata"].name !== "sandbox").map((o) => o["spec"].template.metadata.labels as Record<string, string>);
    for (const labels of others) expect(Object.entries(alias["spec"].selector as Record<string, string>).every(([k, v]) => labels[k] === v)).toBe(false);
    // Each port reaches the container port the sandbox service serves the Routes API on (EPHEMERA_ROUTES_LISTEN, EPHEMERA_ROUTES_HTTP_LISTEN).
    const containerPorts = Object.fromEntries((sandbox.spec.containers[0].ports as Obj[]).map((p) => [p["name"], p["containerPort"]]));
    expect((alias["spec"].ports as Obj[]).map((p) => [p["name"], p["port"], containerPorts[p["targetPort"]]])).toEqual([["grpc", 7777, 7777], ["http", 7778, 7778]]);
    expect(alias["spec"].type ?? "ClusterIP").toBe("ClusterIP");
  });

  it.each(OVERLAYS)("%s lets the runner make and remove its pods' token Secrets, in a namespace enforcing Pod Security baseline", (overlay) => {
    const objs = objects(rendered[overlay]);
    const ns = objs.find((o) => o["kind"] === "Namespace" && o["metadata"].name === "ephemera-runs")!;
    expect(ns["metadata"].labels).toMatchObject({
      "pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/warn": "restricted", "pod-security.kubernetes.io/audit": "restricted",
    });
    const role = objs.find((o) => o["kind"] === "Role" && o["metadata"].namespace === "ephemera-runs" && o["metadata"].name === "ephemera-runner")!;
    const secrets = (role["rules"] as Obj[]).find((r) => r["resources"].includes("secrets"));
    expect(secrets?.["verbs"]).toEqual(["create", "update", "delete"]);
  });

  it.each(OVERLAYS)("%s serves the API and the Routes API on every address only behind the API's tokens", (overlay) => {
    const objs = objects(rendered[overlay]);
    const config = objs.find((o) => o["kind"] === "ConfigMap" && o["metadata"].name === "ephemera-config")!["data"] as Record<string, string>;
    const sandbox = objs.find((o) => o["kind"] === "Deployment" && o["metadata"].name === "sandbox")!["spec"].template.spec.containers[0];
    const env: Record<string, string> = { ...config };
    for (const e of sandbox.env as { name: string; value?: string }[]) if (e.value !== undefined) env[e.name] = e.value;
    expect(env).toMatchObject({ EPHEMERA_ROUTES_LISTEN: "0.0.0.0:7777", EPHEMERA_ROUTES_HTTP_LISTEN: "0.0.0.0:7778" });
    expect(env["EPHEMERA_API_ALLOW_OPEN"]).toBeUndefined();
    // The same check the sandbox service makes at start: with the tokens file it starts...
    expect(accessNotice(env)).toMatch(/^The API asks every call for a bearer token/);
    // ...and without it, it would refuse, naming the Routes API.
    const { EPHEMERA_API_TOKENS: _, ...open } = env;
    expect(() => accessNotice(open)).toThrow(/^the Routes API on 0\.0\.0\.0:777[78] is open/);
  });

  it.each(OVERLAYS)("%s registers the webhook for pod creates, failing open, as the webhook itself would register it", (overlay) => {
    const objs = objects(rendered[overlay]);
    const configuration = objs.find((o) => o["kind"] === "MutatingWebhookConfiguration")!;
    expect(configuration).toEqual(webhookConfiguration({
      target: { service: { namespace: "ephemera-system", name: "webhook", port: 443 } }, excludeNamespaces: ["ephemera-system"],
    }));
    const service = objs.find((o) => o["kind"] === "Service" && o["metadata"].name === "webhook")!;
    expect(service["spec"].ports).toEqual([{ name: "https", port: 443, targetPort: "webhook" }]);
    const webhook = objs.find((o) => o["kind"] === "Deployment" && o["metadata"].name === "webhook")!["spec"].template.spec;
    const env = Object.fromEntries((webhook.containers[0].env as Obj[]).filter((e) => e["value"]).map((e) => [e["name"], e["value"]]));
    expect(env).toMatchObject({
      EPHEMERA_WEBHOOK_REGISTER: "true", EPHEMERA_WEBHOOK_SERVICE: "ephemera-system/webhook:443",
      EPHEMERA_WEBHOOK_HOSTS: "webhook.ephemera-system.svc,webhook.ephemera-system.svc.cluster.local",
    });
    expect(webhook.containers[0].ports[0]).toEqual({ name: "webhook", containerPort: Number(env["EPHEMERA_WEBHOOK_LISTEN"]!.split(":")[1]) });
    // Its token may read and update that one configuration, by name, and nothing else.
    expect(objs.find((o) => o["kind"] === "ClusterRole" && o["metadata"].name === "ephemera-webhook")!["rules"]).toEqual([
      { apiGroups: ["admissionregistration.k8s.io"], resources: ["mutatingwebhookconfigurations"], resourceNames: ["ephemera-router-injector"], verbs: ["get", "update"] },
    ]);
  });

  it("makes prod a three-server NATS with streams of three replicas, one NATS server at a time drained", () => {
    const objs = objects(rendered.prod);
    expect(objs.find((o) => o["kind"] === "StatefulSet")!["spec"].replicas).toBe(3);
    expect(objs.find((o) => o["kind"] === "ConfigMap" && o["metadata"].name === "ephemera-config")!["data"].EPHEMERA_STREAM_REPLICAS).toBe("3");
    expect(objs.find((o) => o["kind"] === "ConfigMap" && o["metadata"].name === "nats-config")!["data"]["cluster.conf"]).toContain("nats-2.nats-headless:6222");
    const nats = objs.find((o) => o["kind"] === "PodDisruptionBudget" && o["metadata"].name === "nats")!;
    expect(nats["spec"]).toEqual({ maxUnavailable: 1, selector: { matchLabels: { "app.kubernetes.io/name": "nats" } } });
    const dev = objects(rendered.dev);
    expect(dev.find((o) => o["kind"] === "StatefulSet")!["spec"].replicas).toBe(1);
    expect(dev.filter((o) => o["kind"] === "PodDisruptionBudget")).toEqual([]);
  });

  // The services a second replica serves (docs/deploy.md, Replicas); the webhook stays at one (one CA per pod).
  const REPLICATED = ["sandbox", "scheduler", "runner", "iocontext", "tunnel", "console"];

  it.each(REPLICATED)("runs %s in prod as two replicas on different nodes, updated one new pod at a time, never both drained", (service) => {
    const objs = objects(rendered.prod);
    const deployment = objs.find((o) => o["kind"] === "Deployment" && o["metadata"].name === service)!;
    const labels = deployment["spec"].template.metadata.labels as Record<string, string>;
    expect(deployment["spec"].replicas).toBe(2);
    expect(deployment["spec"].strategy).toEqual({ type: "RollingUpdate", rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } });
    const spread = deployment["spec"].template.spec.topologySpreadConstraints as Obj[];
    expect(spread).toEqual([{
      maxSkew: 1, topologyKey: "kubernetes.io/hostname", whenUnsatisfiable: "DoNotSchedule",
      labelSelector: { matchLabels: { "app.kubernetes.io/name": service } },
    }]);
    // The spread and the budget count this service's pods: their selectors match its pods and no other Deployment's.
    const selects = (selector: Record<string, string>, podLabels: Record<string, string>) => Object.entries(selector).every(([k, v]) => podLabels[k] === v);
    const others = objs.filter((o) => o["kind"] === "Deployment" && o["metadata"].name !== service).map((o) => o["spec"].template.metadata.labels as Record<string, string>);
    const budgets = objs.filter((o) => o["kind"] === "PodDisruptionBudget" && selects(o["spec"].selector.matchLabels ?? {}, labels));
    expect(budgets.map((b) => [b["metadata"].name, b["spec"].minAvailable, b["spec"].maxUnavailable])).toEqual([[service, 1, undefined]]);
    for (const selector of [spread[0]!["labelSelector"].matchLabels, budgets[0]!["spec"].selector.matchLabels]) {
      expect(selects(selector, labels)).toBe(true);
      expect(others.filter((l) => selects(selector, l))).toEqual([]);
    }
    // In dev: one replica, replaced whole, no budget.
    const dev = objects(rendered.dev).find((o) => o["kind"] === "Deployment" && o["metadata"].name === service)!;
    expect(dev["spec"].replicas).toBe(service === "console" ? 2 : 1);
  });

  it("keeps the webhook at one replica in prod, without a budget that would block every drain", () => {
    const objs = objects(rendered.prod);
    const webhook = objs.find((o) => o["kind"] === "Deployment" && o["metadata"].name === "webhook")!;
    expect(webhook["spec"].replicas).toBe(1);
    expect(objs.filter((o) => o["kind"] === "PodDisruptionBudget").map((o) => o["metadata"].name).sort()).toEqual(["nats", ...REPLICATED].sort());
  });

  it.each(OVERLAYS)("%s: every object validates against the Kubernetes OpenAPI schemas", (overlay) => {
    const results = validate(rendered[overlay]);
    expect(results.length).toBe(objects(rendered[overlay]).length);
    expect(results.filter((r) => !r.ok)).toEqual([]);
  });

  it("the schema check refuses a broken object, naming it", () => {
    const broken = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: broken}\nspec:\n  replicas: many\n  selector: {}\n  template: {}\n";
    const [r] = validate(broken);
    expect(r).toMatchObject({ kind: "Deployment", name: "broken", ok: false });
    expect(r!.error).toMatch(/replicas/);
  });

  it.each(OVERLAYS)("%s holds to the policy: no root, probes and limits everywhere, no wildcard RBAC, no cluster-admin, cluster-wide grants by name, pinned images", (overlay) => {
    expect(violations(objects(rendered[overlay]))).toEqual([]);
  });

  it("the policy names what breaks it", () => {
    const bad: Obj[] = [
      {
        kind: "Deployment", metadata: { name: "bad", namespace: "x" },
        spec: { template: { spec: { securityContext: { runAsUser: 0 }, containers: [{ name: "c", image: "nginx:latest" }] } } },
      },
      { kind: "ClusterRole", metadata: { name: "all" }, rules: [{ apiGroups: ["*"], resources: ["pods"], verbs: ["*"] }] },
      { kind: "ClusterRoleBinding", metadata: { name: "root" }, roleRef: { name: "cluster-admin" } },
      { kind: "ClusterRole", metadata: { name: "wide" }, rules: [{ apiGroups: [""], resources: ["secrets"], verbs: ["get"] }] },
      { kind: "ClusterRoleBinding", metadata: { name: "wide" }, roleRef: { kind: "ClusterRole", name: "wide" } },
    ];
    const found = violations(bad);
    for (const v of [
      "container c: runAsNonRoot is not true", "container c: runAsUser is 0", "container c: no readinessProbe", "container c: no limits.memory",
      "container c: image nginx:latest is not pinned", 'rules[0].apiGroups has "*"', 'rules[0].verbs has "*"', "binds cluster-admin",
      "ClusterRole /wide: rules[0] is granted cluster-wide (ClusterRoleBinding wide) without resourceNames",
    ]) expect(found.some((f) => f.includes(v))).toBe(true);
    expect([pinned("redis:7.2.5-alpine"), pinned("redis"), pinned("localhost:5000/redis"), pinned(`x@sha256:${"a".repeat(64)}`)]).toEqual([true, false, false, true]);
  });

  describe("applied to the simulated cluster", () => {
    let sim: Sim;
    beforeAll(async () => { sim = await startSim(); }, 60_000);
    afterAll(async () => { await sim?.stop(); });

    it.each(OVERLAYS)("kubectl apply -f of %s succeeds, and kubectl reads the objects back", async (overlay) => {
      const applied = await kubectl(sim, ["apply", "-f", "-"], { stdin: rendered[overlay] });
      expect(applied.stdout).toMatch(/deployment.apps\/runner (created|configured|unchanged)/);
      const listed = JSON.parse((await kubectl(sim, ["get", "deploy,sts,svc,networkpolicy", "-n", "ephemera-system", "-o", "json"])).stdout) as Obj;
      const names = (listed["items"] as Obj[]).map((o) => `${o["kind"]}/${o["metadata"].name}`);
      expect(names).toEqual(expect.arrayContaining([
        "Deployment/sandbox", "Deployment/runner", "StatefulSet/nats", "Service/iocontext", "Service/routeserver", "NetworkPolicy/iocontext-ingress",
      ]));
      const routeserver = (listed["items"] as Obj[]).find((o) => o["kind"] === "Service" && o["metadata"].name === "routeserver")!;
      expect(routeserver["spec"].clusterIP).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
      const role = JSON.parse((await kubectl(sim, ["get", "role", "ephemera-runner", "-n", "ephemera-runs", "-o", "json"])).stdout) as Obj;
      expect(role["rules"]).toEqual([
        { apiGroups: [""], resources: ["pods"], verbs: ["create", "delete", "get", "list", "watch"] },
        { apiGroups: [""], resources: ["pods/log"], verbs: ["get"] },
        { apiGroups: [""], resources: ["secrets"], verbs: ["create", "update", "delete"] },
      ]);
    });
  });
});

describe("the Dockerfile and the Tiltfile", () => {
  const paths = (root: string) => execFileSync("python3", [join(__dirname, "tiltfile_paths.py"), root], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();

  it("the Tiltfile parses and every path it names exists", () => {
    expect(paths(ROOT)).toBe("");
  });

  it("the Tiltfile check names a missing path and a syntax error", () => {
    const dir = mkdtempSync(join(tmpdir(), "tiltfile-"));
    try {
      writeFileSync(join(dir, "Tiltfile"), "k8s_yaml(kustomize('deploy/overlays/nope'))\n");
      expect(paths(dir).split("\n")).toEqual(["Dockerfile", "deploy/overlays/nope"]);
      writeFileSync(join(dir, "Tiltfile"), "k8s_yaml(kustomize('deploy'\n");
      expect(() => paths(dir)).toThrow(/SyntaxError/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("the Dockerfile has a stage for every image the Tiltfile and the manifests name, each running as a non-root user", () => {
    const dockerfile = readFileSync(join(ROOT, "Dockerfile"), "utf8");
    const stages = [...dockerfile.matchAll(/^FROM \S+ AS (\S+)/gm)].map((m) => m[1]);
    expect(stages).toEqual(expect.arrayContaining(["sandbox", "scheduler", "runner", "iocontext", "webhook", "agent"]));
    expect(dockerfile).toMatch(/^USER 10001:10001$/m);
    // Each image copies what scripts/images.sh stages: a service's production deploy, the agent's bundle.
    expect(readFileSync(join(ROOT, "scripts/images.sh"), "utf8")).toContain("deploy --prod");
    const prod = objects(render("prod"));
    const config = prod.find((o) => o["kind"] === "ConfigMap" && o["metadata"].name === "ephemera-config")!["data"];
    const images = [...new Set(prod.flatMap((o) => (o["spec"]?.template?.spec?.containers ?? []).map((c: Obj) => c["image"] as string))), config.EPHEMERA_AGENT_IMAGE as string];
    const ours = images.map((i) => /^ephemera\/([a-z-]+):/.exec(i)?.[1]).filter((s): s is string => s !== undefined);
    expect(ours.sort()).toEqual(["agent", "console", "iocontext", "runner", "sandbox", "scheduler", "tunnel", "webhook"]);
    for (const stage of ours) expect(stages).toContain(stage);
    for (const stage of ours) expect(dockerfile).toContain(` .ephemera/images/${stage} /`);
  });
});
