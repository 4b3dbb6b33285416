// The webhook with the simulated cluster, as `pnpm start` runs them: it registers itself
// (a MutatingWebhookConfiguration with its URL and the CA it made), then pods applied with
// kubectl are injected when annotated and left alone otherwise; with the webhook down, pods
// are still created (unrouted). The kubectl-able patch gives a Deployment's template the
// same containers without any webhook.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AdmissionregistrationV1Api, CoreV1Api, KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { createLogger } from "@ephemera/kit";
import { startKubeSim, type KubeSim } from "@ephemera/kube-sim";
import { parseAllDocuments } from "yaml";
import { kubectl } from "../../../test/support/kube.js";
import { webhookConfig } from "./config.js";
import { runPatch } from "./patch/cli.js";
import { CONFIGURATION_NAME } from "./register/configuration.js";
import { isWebhookRegistrationError } from "./register/register.js";
import { startWebhook, type RunningWebhook } from "./start.js";

type Rec = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const logger = createLogger("webhook-test", "silent");
let dir: string;
let sim: KubeSim;
let kc: KubeConfig;
let core: CoreV1Api;
let webhook: RunningWebhook;
const simWarnings: string[] = [];
const env = { EPHEMERA_WEBHOOK_LISTEN: "127.0.0.1:0", EPHEMERA_WEBHOOK_REGISTER: "true", EPHEMERA_ROUTES: "host.kube-sim.internal:7777" };
const cluster = () => ({ kubeconfig: sim.kubeconfigPath });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "webhook-sim-"));
  sim = await startKubeSim({ listen: "127.0.0.1:0", kubeconfigPath: join(dir, "kubeconfig"), runtime: "process", warn: (l) => simWarnings.push(l) });
  kc = new KubeConfig();
  kc.loadFromFile(sim.kubeconfigPath);
  core = kc.makeApiClient(CoreV1Api);
  webhook = await startWebhook(webhookConfig(env), { logger, kubeconfig: kc });
  await core.createNamespace({ body: { metadata: { name: "demo-routing" } } });
});
afterAll(async () => {
  await webhook?.stop();
  await sim?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** A pod as a Deployment's ReplicaSet makes it. */
const podYaml = (name: string, annotations: string, ports = "[{containerPort: 8080, name: http}]") => `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
  namespace: demo-routing
  labels: {app: backend, pod-template-hash: 5c4d7f}
  annotations: {${annotations}}
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: backend-5c4d7f, uid: 3f1c2a5e-0000-4000-8000-000000000001, controller: true}]
spec:
  restartPolicy: Never
  containers: [{name: backend, image: busybox, command: ["true"], ports: ${ports}}]
`;
const readPod = (name: string): Promise<V1Pod> => core.readNamespacedPod({ name, namespace: "demo-routing" });
const names = (list: Array<{ name: string }> | undefined) => (list ?? []).map((c) => c.name);

describe("registered with the simulated cluster", () => {
  it("wrote its MutatingWebhookConfiguration: its URL, its CA, failing open, pods only, opted-out namespaces left out", async () => {
    const got = await kc.makeApiClient(AdmissionregistrationV1Api).readMutatingWebhookConfiguration({ name: CONFIGURATION_NAME });
    const [hook] = got.webhooks!;
    expect(hook!.clientConfig).toEqual({ url: `${webhook.url}/mutate-pods`, caBundle: Buffer.from(webhook.caBundle!).toString("base64") });
    expect(hook).toMatchObject({ failurePolicy: "Ignore", sideEffects: "None", admissionReviewVersions: ["v1"], timeoutSeconds: 3 });
    expect(hook!.rules).toEqual([{ operations: ["CREATE"], apiGroups: [""], apiVersions: ["v1"], resources: ["pods"], scope: "Namespaced" }]);
    expect(hook!.namespaceSelector!.matchExpressions).toEqual([
      { key: "ephemera.dev/injection", operator: "NotIn", values: ["disabled"] },
      { key: "kubernetes.io/metadata.name", operator: "NotIn", values: ["kube-system", "ephemera-system"] },
    ]);
  });

  it("injects an annotated pod applied with kubectl: the capture init container and the router, for its Deployment", async () => {
    await kubectl(cluster(), ["apply", "-f", "-"], { stdin: podYaml("backend-5c4d7f-a1", `sidecar.ephemera.dev/inject: "true"`) });
    const pod = await readPod("backend-5c4d7f-a1");
    expect(names(pod.spec!.initContainers)).toEqual(["ephemera-router-init"]);
    expect(names(pod.spec!.containers)).toEqual(["backend", "ephemera-router"]);
    const router = pod.spec!.containers[1]!;
    expect(router.image).toBe("ephemera/router:0.1.0");
    expect(Object.fromEntries(router.env!.map((e) => [e.name, e.value]))).toEqual({
      EPHEMERA_ROUTER_WORKLOAD: "Deployment/demo-routing/backend", EPHEMERA_ROUTER_PORTS: "8080:15000", EPHEMERA_ROUTES: "host.kube-sim.internal:7777",
    });
    expect(pod.metadata!.annotations).toMatchObject({ "sidecar.ephemera.dev/status": "injected", "kubectl.kubernetes.io/default-container": "backend" });
    // The server's defaults apply to what the webhook added, as on a real cluster.
    expect(router.terminationMessagePolicy).toBe("File");
  });

  it("injects a pod named by generateName, as a ReplicaSet creates them (its review has no name yet)", async () => {
    const created = await core.createNamespacedPod({
      namespace: "demo-routing",
      body: {
        metadata: {
          generateName: "backend-5c4d7f-", labels: { "pod-template-hash": "5c4d7f" }, annotations: { "sidecar.ephemera.dev/inject": "true" },
          ownerReferences: [{ apiVersion: "apps/v1", kind: "ReplicaSet", name: "backend-5c4d7f", uid: "3f1c2a5e-0000-4000-8000-000000000001", controller: true }],
        },
        spec: { restartPolicy: "Never", containers: [{ name: "backend", image: "busybox", command: ["true"], ports: [{ containerPort: 8080 }] }] },
      },
    });
    expect(created.metadata!.name).toMatch(/^backend-5c4d7f-[0-9a-f]{5}$/);
    expect(names(created.spec!.containers)).toEqual(["backend", "ephemera-router"]);
  });

  it("injects Signadot's annotation too, and leaves an unannotated pod exactly as applied", async () => {
    await kubectl(cluster(), ["apply", "-f", "-"], { stdin: podYaml("backend-5c4d7f-b2", `sidecar.signadot.com/inject: "true"`) });
    expect(names((await readPod("backend-5c4d7f-b2")).spec!.containers)).toEqual(["backend", "ephemera-router"]);
    await kubectl(cluster(), ["apply", "-f", "-"], { stdin: podYaml("backend-5c4d7f-c3", "team: shop") });
    const plain = await readPod("backend-5c4d7f-c3");
    expect(names(plain.spec!.containers)).toEqual(["backend"]);
    expect(plain.spec!.initContainers).toBeUndefined();
    expect(Object.keys(plain.metadata!.annotations!)).toEqual(["kubectl.kubernetes.io/last-applied-configuration", "team"]);
  });

  it("tells kubectl why an annotated pod with no port is not injected", async () => {
    const applied = await kubectl(cluster(), ["apply", "-f", "-"], { stdin: podYaml("backend-5c4d7f-d4", `sidecar.ephemera.dev/inject: "true"`, "[]") });
    expect(applied.stderr).toContain('Warning: ephemera-router not injected into pod "demo-routing/backend-5c4d7f-d4": its containers declare no TCP containerPort');
    expect(names((await readPod("backend-5c4d7f-d4")).spec!.containers)).toEqual(["backend"]);
  });

  it("registers again over the last configuration (a new CA at each start), keeping what kubectl put on it", async () => {
    await kubectl(cluster(), ["annotate", "mutatingwebhookconfiguration", CONFIGURATION_NAME, "owner=platform-team"]);
    const again = await startWebhook(webhookConfig(env), { logger, kubeconfig: kc });
    try {
      const got = await kc.makeApiClient(AdmissionregistrationV1Api).readMutatingWebhookConfiguration({ name: CONFIGURATION_NAME });
      expect(got.webhooks![0]!.clientConfig).toEqual({ url: `${again.url}/mutate-pods`, caBundle: Buffer.from(again.caBundle!).toString("base64") });
      expect(again.caBundle).not.toBe(webhook.caBundle);
      expect(got.metadata!.annotations).toEqual({ owner: "platform-team" });
      await kubectl(cluster(), ["apply", "-f", "-"], { stdin: podYaml("backend-5c4d7f-e5", `sidecar.ephemera.dev/inject: "true"`) });
      expect(names((await readPod("backend-5c4d7f-e5")).spec!.containers)).toEqual(["backend", "ephemera-router"]);
    } finally {
      await again.stop();
    }
  });

  it("with the webhook down, an annotated pod is still created, unrouted, and kube-sim warns it failed open", async () => {
    // The last registration points at the webhook just stopped: the webhook outage.
    const before = simWarnings.length;
    await kubectl(cluster(), ["apply", "-f", "-"], { stdin: podYaml("backend-5c4d7f-f6", `sidecar.ephemera.dev/inject: "true"`) });
    const pod = await readPod("backend-5c4d7f-f6");
    expect(names(pod.spec!.containers)).toEqual(["backend"]);
    expect(simWarnings.slice(before)).toEqual([expect.stringMatching(/^Failed calling webhook, failing open inject\.router\.ephemera\.dev: .*connect: connection refused$/)]);
  });

  it("says why registering failed when the cluster refuses it", async () => {
    await fetch(`${sim.url}/sim/faults`, { method: "POST", body: JSON.stringify({ apiErrors: { next: 1, codes: [403], resources: ["mutatingwebhookconfigurations"], verbs: ["get"] } }) });
    const err = await startWebhook(webhookConfig(env), { logger, kubeconfig: kc }).then(() => undefined, (e: unknown) => e);
    expect(isWebhookRegistrationError(err)).toBe(true);
    expect((err as Error).message).toBe("registering the MutatingWebhookConfiguration ephemera-router-injector failed: 403 forbidden: the caller may not do this (injected by kube-sim)");
  });
});

describe("the kubectl-able patch", () => {
  const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: frontend, namespace: demo-routing}
spec:
  selector: {matchLabels: {app: frontend}}
  template:
    metadata:
      labels: {app: frontend}
      annotations: {sidecar.ephemera.dev/inject: "true"}
    spec:
      containers: [{name: frontend, image: ephemera/example-echo:0.1.0, ports: [{containerPort: 8080}]}]
---
apiVersion: v1
kind: Service
metadata: {name: frontend, namespace: demo-routing}
spec: {selector: {app: frontend}, ports: [{port: 8080}]}
`;
  const patch = (argv: string[], stdin: string) => {
    let stdout = "";
    const stderr: string[] = [];
    const code = runPatch(argv, { env: { EPHEMERA_ROUTES: "host.kube-sim.internal:7777" }, stdin: () => stdin, stdout: (t) => { stdout += t; }, stderr: (l) => stderr.push(l) });
    return { code, stdout, stderr };
  };

  it("prints the manifests with the router in the annotated template, which kubectl applies; a second pass changes nothing", async () => {
    const out = patch(["-"], deployment);
    expect(out.code).toBe(0);
    expect(out.stderr).toEqual(["Deployment demo-routing/frontend: injected (workload Deployment/demo-routing/frontend, ports 8080→15000)"]);
    const applied = await kubectl(cluster(), ["apply", "-f", "-"], { stdin: out.stdout });
    expect(applied.stdout).toBe("deployment.apps/frontend created\nservice/frontend created\n");
    const got = JSON.parse((await kubectl(cluster(), ["get", "deployment", "frontend", "-n", "demo-routing", "-o", "json"])).stdout) as Rec;
    const template = got["spec"].template;
    expect(names(template.spec.initContainers)).toEqual(["ephemera-router-init"]);
    expect(names(template.spec.containers)).toEqual(["frontend", "ephemera-router"]);
    expect(template.spec.containers[1].env).toContainEqual({ name: "EPHEMERA_ROUTER_WORKLOAD", value: "Deployment/demo-routing/frontend" });
    const twice = patch(["-"], out.stdout);
    expect(twice.stdout).toBe(out.stdout);
    expect(twice.stderr).toEqual(["Deployment demo-routing/frontend: left as it is: has the router already"]);
  });

  it("leaves an unannotated template alone unless --all, and says so", () => {
    const plain = deployment.replace(`annotations: {sidecar.ephemera.dev/inject: "true"}`, "annotations: {}");
    const left = patch(["-"], plain);
    expect(left.stderr).toEqual(['Deployment demo-routing/frontend: left as it is: not annotated sidecar.ephemera.dev/inject: "true" (--all injects it anyway)']);
    const docs = parseAllDocuments(left.stdout).map((d) => d.toJSON() as Rec);
    expect(names(docs[0]!["spec"].template.spec.containers)).toEqual(["frontend"]);
    const all = patch(["--all", "-"], plain);
    expect(names((parseAllDocuments(all.stdout)[0]!.toJSON() as Rec)["spec"].template.spec.containers)).toEqual(["frontend", "ephemera-router"]);
  });

  it("refuses bad arguments and unreadable manifests with a clear line", () => {
    expect(patch([], "")).toMatchObject({ code: 2, stderr: [expect.stringMatching(/^one FILE \(or - for stdin\), not 0\nusage: patch\.js/)] });
    expect(patch(["-"], "kind: [unclosed")).toMatchObject({ code: 1, stderr: [expect.stringMatching(/^patch\.js: document 1: not YAML: /)] });
    expect(patch(["--token-secret", "only-a-name", "-"], deployment)).toMatchObject({ code: 1, stderr: [expect.stringContaining('EPHEMERA_ROUTER_TOKEN_SECRET must be name/key of a Secret in each injected namespace, got "only-a-name"')] });
  });
});

