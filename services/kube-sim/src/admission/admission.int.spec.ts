// Mutating admission on the simulated API server, against real HTTPS webhooks: the
// MutatingWebhookConfiguration kind (kubectl apply, discovery, validation), pods mutated by
// the JSONPatch a webhook answers, the selectors and rules that choose webhooks, and what
// happens when a webhook fails: Ignore creates the pod unmutated with a warning logged,
// Fail refuses it with the API server's message, a deadline bounds a webhook that hangs.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { promisify } from "node:util";
import { AdmissionregistrationV1Api, type V1MutatingWebhook, type V1Pod } from "@kubernetes/client-node";
import { makeCerts, type TestCerts } from "../../../../test/support/certs.js";
import { fresh, rejection, startHarness, statusOf, type Harness } from "../sim.testkit.js";

type Rec = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const run = promisify(execFile);

interface TestWebhook { url: string; reviews: Rec[]; release(): void; stop(): Promise<void> }

/** A webhook on this machine answering each review with `answer(request)`; "hang" holds the answer until release(). */
async function startTestWebhook(certs: TestCerts, answer: (request: Rec) => Rec | "hang"): Promise<TestWebhook> {
  const reviews: Rec[] = [];
  const held: Array<() => void> = [];
  const server: Server = createServer(certs.server(), (req, res) => {
    let text = "";
    req.on("data", (c: Buffer) => { text += c.toString(); });
    req.on("end", () => {
      const review = JSON.parse(text) as Rec;
      reviews.push({ ...review, url: req.url });
      const response = answer(review["request"]);
      if (response === "hang") {
        held.push(() => { res.writeHead(200); res.end("{}"); });
        return;
      }
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response: { uid: review["request"].uid, ...response } }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}/mutate`, reviews,
    release: () => { for (const h of held.splice(0)) h(); },
    stop: () => new Promise<void>((r) => { server.close(() => r()); server.closeAllConnections(); }),
  };
}

const patch = (ops: unknown[]) => ({ allowed: true, patchType: "JSONPatch", patch: Buffer.from(JSON.stringify(ops)).toString("base64") });
const labelOps = [{ op: "add", path: "/metadata/labels", value: { mutated: "yes" } }];

let h: Harness;
let certs: TestCerts;
let api: AdmissionregistrationV1Api;
const warnings: string[] = [];
beforeAll(async () => {
  certs = makeCerts();
  h = await startHarness({ runtime: "process", warn: (line) => warnings.push(line) });
  api = h.kc.makeApiClient(AdmissionregistrationV1Api);
});
afterAll(async () => {
  await h.sim.stop();
  certs.remove();
});

/** A webhook configuration that only this test's namespace reaches, so tests never meet each other's webhooks. */
async function register(name: string, ns: string, webhook: Partial<V1MutatingWebhook>): Promise<void> {
  await api.createMutatingWebhookConfiguration({
    body: {
      metadata: { name },
      webhooks: [{
        name: `${name}.test.ephemera.dev`, sideEffects: "None", admissionReviewVersions: ["v1"],
        rules: [{ operations: ["CREATE"], apiGroups: [""], apiVersions: ["v1"], resources: ["pods"] }],
        clientConfig: {}, ...webhook,
        namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": ns }, ...webhook.namespaceSelector },
      }],
    },
  });
}
const pemBase64 = (path: string) => Buffer.from(readFileSync(path, "utf8")).toString("base64");
const caBundle = () => pemBase64(certs.files.ca);
const unregister = (name: string) => api.deleteMutatingWebhookConfiguration({ name });

async function namespace(labels: Record<string, string> = {}): Promise<string> {
  const ns = fresh("adm");
  await h.core.createNamespace({ body: { metadata: { name: ns, labels } } });
  return ns;
}
const createPod = (ns: string, name: string, labels?: Record<string, string>) => h.core.createNamespacedPod({
  namespace: ns,
  body: { metadata: { name, ...(labels ? { labels } : {}) }, spec: { restartPolicy: "Never", containers: [{ name: "main", image: "busybox", command: ["true"] }] } } as V1Pod,
});

describe("the MutatingWebhookConfiguration kind", () => {
  const kubectl = async (args: string[], stdin?: string) => {
    const child = run("kubectl", ["--kubeconfig", h.sim.kubeconfigPath, ...args], { timeout: 20000 });
    if (stdin !== undefined) { child.child.stdin!.end(stdin); }
    return (await child).stdout;
  };
  const manifest = (timeout: number) => `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: kubectl-applied}
webhooks:
- name: inject.router.ephemera.dev
  clientConfig: {url: "https://127.0.0.1:7781/mutate-pods"}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods], scope: Namespaced}]
  failurePolicy: Ignore
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: ${timeout}
  objectSelector: {matchLabels: {never: "selected"}}
`;

  it("is discovered, applied and applied again with kubectl, and read back with the server's defaults", async () => {
    expect(await kubectl(["api-resources", "--api-group=admissionregistration.k8s.io", "--no-headers"]))
      .toMatch(/^mutatingwebhookconfigurations\s+admissionregistration\.k8s\.io\/v1\s+false\s+MutatingWebhookConfiguration$/m);
    expect(await kubectl(["apply", "-f", "-"], manifest(3))).toBe("mutatingwebhookconfiguration.admissionregistration.k8s.io/kubectl-applied created\n");
    expect(await kubectl(["apply", "-f", "-"], manifest(5))).toBe("mutatingwebhookconfiguration.admissionregistration.k8s.io/kubectl-applied configured\n");
    const got = JSON.parse(await kubectl(["get", "mutatingwebhookconfiguration", "kubectl-applied", "-o", "json"])) as Rec;
    expect(got["webhooks"][0]).toMatchObject({ timeoutSeconds: 5, failurePolicy: "Ignore", matchPolicy: "Equivalent", namespaceSelector: {}, reinvocationPolicy: "Never" });
    expect(await kubectl(["get", "mutatingwebhookconfigurations", "-o", "name"])).toContain("mutatingwebhookconfiguration.admissionregistration.k8s.io/kubectl-applied\n");
    expect(await kubectl(["delete", "-f", "-"], manifest(5))).toContain("deleted");
  });

  it("refuses a configuration the real server refuses, naming each field and rule", async () => {
    const err = await rejection(api.createMutatingWebhookConfiguration({
      body: {
        metadata: { name: "bad" },
        webhooks: [{ name: "inject", clientConfig: { url: "http://127.0.0.1:7781/x?y=1" }, timeoutSeconds: 60, admissionReviewVersions: ["v1"] } as V1MutatingWebhook],
      },
    }));
    const status = statusOf(err);
    expect(status["code"]).toBe(422);
    expect(status["message"]).toBe('MutatingWebhookConfiguration "bad" is invalid: ['
      + 'webhooks[0].name: Invalid value: "inject": should be a domain with at least three segments separated by dots, '
      + `webhooks[0].clientConfig.url: Invalid value: "http://127.0.0.1:7781/x?y=1": 'https' is the only allowed URL scheme, `
      + 'webhooks[0].sideEffects: Required value: supported values: "None", "NoneOnDryRun", '
      + 'webhooks[0].timeoutSeconds: Invalid value: 60: the timeout value must be between 1 and 30 seconds]');
  });
});

describe("a pod create with a mutating webhook", () => {
  let webhook: TestWebhook;
  beforeAll(async () => { webhook = await startTestWebhook(certs, () => patch(labelOps)); });
  afterAll(() => webhook.stop());

  it("sends the webhook an AdmissionReview v1 and stores the pod as its JSONPatch leaves it", async () => {
    const ns = await namespace();
    await register("mutates", ns, { clientConfig: { url: webhook.url, caBundle: caBundle() }, timeoutSeconds: 7 });
    try {
      const created = await createPod(ns, "p1");
      expect(created.metadata?.labels).toEqual({ mutated: "yes" });
      expect((await h.core.readNamespacedPod({ name: "p1", namespace: ns })).metadata?.labels).toEqual({ mutated: "yes" });
      const review = webhook.reviews.at(-1)!;
      expect(review["url"]).toBe("/mutate?timeout=7s");
      expect(review).toMatchObject({
        apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview",
        request: {
          kind: { group: "", version: "v1", kind: "Pod" }, resource: { group: "", version: "v1", resource: "pods" },
          name: "p1", namespace: ns, operation: "CREATE", dryRun: false, object: { metadata: { name: "p1" }, spec: { containers: [{ name: "main" }] } },
        },
      });
      expect(review["request"].uid).toMatch(/^[0-9a-f-]{36}$/);
    } finally { await unregister("mutates"); }
  });

  it("skips webhooks whose namespace selector, object selector or rules do not match", async () => {
    const ns = await namespace({ "ephemera.dev/injection": "disabled" });
    await register("selects", ns, {
      clientConfig: { url: webhook.url, caBundle: caBundle() },
      namespaceSelector: { matchExpressions: [{ key: "ephemera.dev/injection", operator: "NotIn", values: ["disabled"] }] },
    });
    const other = await namespace();
    await register("objects", other, {
      clientConfig: { url: webhook.url, caBundle: caBundle() },
      objectSelector: { matchExpressions: [{ key: "skip", operator: "DoesNotExist" }] },
    });
    try {
      const before = webhook.reviews.length;
      expect((await createPod(ns, "in-disabled-ns")).metadata?.labels).toBeUndefined();
      expect((await createPod(other, "opted-out", { skip: "true" })).metadata?.labels).toEqual({ skip: "true" });
      await h.core.createNamespacedService({ namespace: other, body: { metadata: { name: "svc" }, spec: { ports: [{ port: 80 }] } } });
      expect(webhook.reviews.length).toBe(before);
      expect((await createPod(other, "selected")).metadata?.labels).toEqual({ mutated: "yes" });
      expect(webhook.reviews.length).toBe(before + 1);
    } finally { await unregister("selects"); await unregister("objects"); }
  });

  it("passes a webhook's warnings to the client, and refuses what a webhook denies", async () => {
    const ns = await namespace();
    const warns = await startTestWebhook(certs, (request) => (request["object"].metadata.name === "denied"
      ? { allowed: false, status: { code: 403, message: "pods named denied are not welcome" } }
      : { allowed: true, warnings: ["mind the gap", "naïve… but UTF-8"] }));
    await register("warns", ns, { clientConfig: { url: warns.url, caBundle: caBundle() } });
    try {
      const res = await fetch(`${h.sim.url}/api/v1/namespaces/${ns}/pods`, {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ metadata: { name: "warned" }, spec: { restartPolicy: "Never", containers: [{ name: "main", image: "busybox", command: ["true"] }] } }),
      });
      expect(res.status).toBe(201);
      // Two headers, the second's bytes UTF-8 as on a real server (fetch reads header bytes as latin1).
      expect(Buffer.from(res.headers.get("warning")!, "latin1").toString("utf8")).toBe('299 - "mind the gap", 299 - "naïve… but UTF-8"');
      const status = statusOf(await rejection(createPod(ns, "denied")));
      expect([status["code"], status["message"]]).toEqual([403, 'admission webhook "warns.test.ephemera.dev" denied the request: pods named denied are not welcome']);
    } finally { await unregister("warns"); await warns.stop(); }
  });
});

describe("a webhook that fails", () => {
  const down = async () => { const w = await startTestWebhook(certs, () => patch(labelOps)); await w.stop(); return w.url; };

  it("with failurePolicy Ignore, down: the pod is created unmutated and a warning logged", async () => {
    const ns = await namespace();
    const url = await down();
    await register("outage", ns, { clientConfig: { url, caBundle: caBundle() }, failurePolicy: "Ignore" });
    try {
      const created = await createPod(ns, "still-starts");
      expect(created.metadata?.labels).toBeUndefined();
      const port = new URL(url).port;
      expect(warnings).toContainEqual(`Failed calling webhook, failing open outage.test.ephemera.dev: failed calling webhook "outage.test.ephemera.dev": `
        + `failed to call webhook: Post "https://127.0.0.1:${port}/mutate?timeout=10s": dial tcp 127.0.0.1:${port}: connect: connection refused`);
    } finally { await unregister("outage"); }
  });

  it("with failurePolicy Fail, down: the create is refused with the API server's error and nothing stored", async () => {
    const ns = await namespace();
    const url = await down();
    await register("strict", ns, { clientConfig: { url, caBundle: caBundle() }, failurePolicy: "Fail", timeoutSeconds: 2 });
    try {
      const status = statusOf(await rejection(createPod(ns, "refused")));
      const port = new URL(url).port;
      expect(status).toMatchObject({
        code: 500, reason: "InternalError",
        message: `Internal error occurred: failed calling webhook "strict.test.ephemera.dev": failed to call webhook: Post "https://127.0.0.1:${port}/mutate?timeout=2s": dial tcp 127.0.0.1:${port}: connect: connection refused`,
      });
      expect((await h.core.listNamespacedPod({ namespace: ns })).items).toEqual([]);
    } finally { await unregister("strict"); }
  });

  it("checks the webhook's certificate against caBundle: another CA's is refused", async () => {
    const ns = await namespace();
    const webhook = await startTestWebhook(certs, () => patch(labelOps));
    await register("wrong-ca", ns, { clientConfig: { url: webhook.url, caBundle: pemBase64(certs.files.otherCa) }, failurePolicy: "Fail" });
    try {
      const status = statusOf(await rejection(createPod(ns, "untrusted")));
      expect(status["message"]).toMatch(/failed to call webhook: Post ".*": tls: failed to verify certificate: x509: certificate signed by unknown authority$/);
      expect(webhook.reviews).toEqual([]);
    } finally { await unregister("wrong-ca"); await webhook.stop(); }
  });

  it("bounds a webhook that does not answer by its timeoutSeconds: Fail refuses, Ignore goes on", async () => {
    const ns = await namespace();
    const hangs = await startTestWebhook(certs, () => "hang");
    await register("hangs", ns, { clientConfig: { url: hangs.url, caBundle: caBundle() }, failurePolicy: "Fail", timeoutSeconds: 1 });
    try {
      const started = Date.now();
      const status = statusOf(await rejection(createPod(ns, "late")));
      expect(Date.now() - started).toBeLessThan(5000);
      expect(status["message"]).toMatch(/failed calling webhook "hangs.test.ephemera.dev": failed to call webhook: Post ".*\?timeout=1s": context deadline exceeded$/);
      await api.patchMutatingWebhookConfiguration({ name: "hangs", body: [{ op: "replace", path: "/webhooks/0/failurePolicy", value: "Ignore" }] });
      expect((await createPod(ns, "goes-on")).metadata?.name).toBe("goes-on");
      expect(hangs.reviews.length).toBe(2);
    } finally { hangs.release(); await unregister("hangs"); await hangs.stop(); }
  });

  it("a clientConfig.service, which kube-sim cannot reach, is a failed call: Ignore goes on, saying why", async () => {
    const ns = await namespace();
    await register("by-service", ns, { clientConfig: { service: { namespace: "ephemera-system", name: "webhook" } }, failurePolicy: "Ignore" });
    try {
      expect((await createPod(ns, "unrouted")).metadata?.name).toBe("unrouted");
      expect(warnings.at(-1)).toContain("kube-sim calls webhooks by clientConfig.url only; clientConfig.service ephemera-system/webhook:443 is not resolved");
    } finally { await unregister("by-service"); }
  });
});
