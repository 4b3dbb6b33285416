// The webhook's HTTPS server with a real TLS client: AdmissionReviews answered with the
// router's patch (same uid, base64 JSONPatch), a clear 400 for what is no review, health,
// and a certificate made at start that a client trusting its CA (and only that) accepts.
import { request } from "node:https";
import jsonpatch from "fast-json-patch";
import { createLogger } from "@ephemera/kit";
import { Registry } from "@ephemera/kit/metrics";
import { makeCerts, type WebhookCerts } from "../certs/certs.js";
import { injectRouter, type InjectOptions } from "../inject/inject.js";
import type { Pod } from "../inject/pod.js";
import { checkWebhookHealth } from "./health.js";
import { WebhookMetrics } from "./metrics.js";
import { startWebhookServer, type WebhookServer } from "./server.js";

const inject: InjectOptions = { image: "ephemera/router:0.1.0", routes: "host.kube-sim.internal:7777" };
let certs: WebhookCerts;
let server: WebhookServer;
const registry = new Registry();
beforeAll(async () => {
  certs = await makeCerts(["localhost", "127.0.0.1"]);
  server = await startWebhookServer({
    listen: "127.0.0.1:0", tls: certs, inject, logger: createLogger("webhook-test", "silent"), metrics: new WebhookMetrics(registry),
  });
});
afterAll(() => server.stop());

interface Reply { status: number; type: string | undefined; text: string; json: () => Record<string, any> } // eslint-disable-line @typescript-eslint/no-explicit-any

function call(path: string, options: { method?: string; body?: string; ca?: string; servername?: string; contentType?: string } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(`${server.url}${path}`, {
      method: options.method ?? "GET", ca: options.ca ?? certs.ca, ...(options.servername ? { servername: options.servername } : {}),
      headers: options.body !== undefined ? { "Content-Type": options.contentType ?? "application/json" } : {}, timeout: 5000,
    }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => { text += c; });
      res.on("end", () => resolve({ status: res.statusCode!, type: res.headers["content-type"], text, json: () => JSON.parse(text) }));
    });
    req.on("error", reject);
    req.end(options.body);
  });
}

const pod = (annotations: Record<string, string>, ports = [{ containerPort: 8080 }]): Pod => ({
  metadata: {
    generateName: "backend-5c4d7-", annotations, labels: { "pod-template-hash": "5c4d7" },
    ownerReferences: [{ kind: "ReplicaSet", name: "backend-5c4d7", controller: true }],
  },
  spec: { containers: [{ name: "backend", image: "ephemera/example-echo:0.1.0", ports }] },
});
const review = (object: unknown, extra: Record<string, unknown> = {}) => JSON.stringify({
  apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview",
  request: {
    uid: "705ab4f5-6393-11e8-b7cc-42010a800002", kind: { group: "", version: "v1", kind: "Pod" }, resource: { group: "", version: "v1", resource: "pods" },
    namespace: "demo-routing", operation: "CREATE", object, ...extra,
  },
});
const mutate = (body: string, contentType?: string) => call("/mutate-pods", { method: "POST", body, ...(contentType ? { contentType } : {}) });

describe("POST /mutate-pods", () => {
  it("answers an annotated pod's review with its uid and the router's patch, base64 JSONPatch", async () => {
    const asked = pod({ "sidecar.ephemera.dev/inject": "true" });
    const reply = await mutate(review(asked));
    expect(reply.status).toBe(200);
    expect(reply.type).toBe("application/json");
    const { apiVersion, kind, response } = reply.json();
    expect({ apiVersion, kind }).toEqual({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview" });
    expect(response).toMatchObject({ uid: "705ab4f5-6393-11e8-b7cc-42010a800002", allowed: true, patchType: "JSONPatch" });
    const ops = JSON.parse(Buffer.from(response.patch, "base64").toString("utf8"));
    expect(ops).toEqual(injectRouter(asked, { ...inject, namespace: "demo-routing" }));
    const mutated = jsonpatch.applyPatch(structuredClone(asked), ops, true, false).newDocument as Pod;
    expect(mutated.spec!.containers!.map((c) => c.name)).toEqual(["backend", "ephemera-router"]);
    const env = Object.fromEntries((mutated.spec!.containers![1]!["env"] as Array<{ name: string; value: string }>).map((e) => [e.name, e.value]));
    expect(env).toMatchObject({ EPHEMERA_ROUTER_WORKLOAD: "Deployment/demo-routing/backend", EPHEMERA_ROUTES: "host.kube-sim.internal:7777" });
  });

  it("allows a pod that does not ask, and an injected one, with no patch", async () => {
    for (const object of [pod({}), pod({ "sidecar.signadot.com/inject": "false" })]) {
      const { response } = (await mutate(review(object))).json();
      expect(response).toEqual({ uid: "705ab4f5-6393-11e8-b7cc-42010a800002", allowed: true });
    }
  });

  it("allows a pod with no port to capture, with a warning saying why, and no patch", async () => {
    const { response } = (await mutate(review(pod({ "sidecar.ephemera.dev/inject": "true" }, [])))).json();
    expect(response.patch).toBeUndefined();
    expect(response.warnings).toEqual([expect.stringMatching(/^ephemera-router not injected into pod "demo-routing\/backend-5c4d7-\*": its containers declare no TCP containerPort/)]);
  });

  it("allows what is not a pod create (another kind, an update) untouched", async () => {
    const update = review(pod({ "sidecar.ephemera.dev/inject": "true" }), { operation: "UPDATE" });
    expect((await mutate(update)).json().response).toEqual({ uid: "705ab4f5-6393-11e8-b7cc-42010a800002", allowed: true });
    const service = review({ metadata: { name: "backend" } }, { kind: { group: "", version: "v1", kind: "Service" } });
    expect((await mutate(service)).json().response).toEqual({ uid: "705ab4f5-6393-11e8-b7cc-42010a800002", allowed: true });
  });

  it("answers 400 to what is no AdmissionReview v1, naming the field and the rule", async () => {
    const cases: Array<[string, string]> = [
      ["{not json", "malformed AdmissionReview: the body is not JSON"],
      ["[]", "malformed AdmissionReview: (body): must be a JSON object"],
      [review(pod({})).replace("admission.k8s.io/v1", "admission.k8s.io/v1beta1"), 'malformed AdmissionReview: apiVersion: must be admission.k8s.io/v1 (admissionReviewVersions: [v1]), not "admission.k8s.io/v1beta1"'],
      [JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview" }), "malformed AdmissionReview: request: required, an object"],
      [review(pod({}), { uid: "" }), "malformed AdmissionReview: request.uid: required, a non-empty string"],
      [review(undefined), "malformed AdmissionReview: request.object: required for a pod CREATE, the pod"],
    ];
    for (const [body, message] of cases) {
      const reply = await mutate(body);
      expect([reply.status, reply.text]).toEqual([400, expect.stringContaining(message)]);
    }
  });

  it("takes JSON only, POST only", async () => {
    expect((await mutate(review(pod({})), "application/yaml")).status).toBe(415);
    const get = await call("/mutate-pods");
    expect([get.status, get.text]).toEqual([405, "/mutate-pods takes POST\n"]);
  });
});

describe("the rest of the server", () => {
  it("counts the reviews it answered by what was done, refusals too", async () => {
    const count = async (outcome: string) => (await registry.getSingleMetric("ephemera_webhook_reviews_total")!.get()).values.find((v) => v.labels["outcome"] === outcome)?.value ?? 0;
    const [injected, notAsked, refused] = [await count("injected"), await count("not-asked"), await count("refused")];
    await mutate(review(pod({ "sidecar.ephemera.dev/inject": "true" })));
    await mutate(review(pod({})));
    await mutate("{not json");
    expect([await count("injected"), await count("not-asked"), await count("refused")]).toEqual([injected + 1, notAsked + 1, refused + 1]);
    expect(await registry.metrics()).toMatch(/^ephemera_webhook_review_duration_seconds_count \d+$/m);
  });

  it("answers /healthz, and 404 elsewhere saying where reviews go", async () => {
    expect(await call("/healthz")).toMatchObject({ status: 200, text: "ok\n" });
    expect(await checkWebhookHealth(server.url)).toBe(true);
    expect(await call("/mutate")).toMatchObject({ status: 404, text: "no /mutate here: AdmissionReviews go to POST /mutate-pods\n" });
  });

  it("serves a certificate made at start for its names, which a client trusting another CA refuses", async () => {
    expect((await call("/healthz", { servername: "localhost" })).status).toBe(200);
    const other = await makeCerts(["localhost"]);
    await expect(call("/healthz", { ca: other.ca })).rejects.toThrow(/unable to verify the first certificate/);
    await expect(call("/healthz", { servername: "webhook.ephemera-system.svc" })).rejects.toThrow(/Hostname\/IP does not match|altnames/);
  });

  it("is reported down when nothing listens", async () => {
    const gone = await startWebhookServer({ listen: "127.0.0.1:0", tls: certs, inject, logger: createLogger("webhook-test", "silent") });
    await gone.stop();
    expect(await checkWebhookHealth(gone.url, 1000)).toBe(false);
  });
});
