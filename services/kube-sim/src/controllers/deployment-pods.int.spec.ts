// The Deployment controller's pods (workloadPods): made from the template through the API's
// create path, owned as a ReplicaSet's, replaced on a template change or when one ends, and
// deleted with the Deployment. Mutating webhooks see them: an admission webhook that labels
// every pod it is asked about shows the controller's creates go through admission.
import { AppsV1Api, type V1Pod } from "@kubernetes/client-node";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { readFileSync } from "node:fs";
import { makeCerts } from "../../../../test/support/certs.js";
import { fresh, startHarness, waitFor, type Harness } from "../sim.testkit.js";

const pods = async (h: Harness, app: string): Promise<V1Pod[]> =>
  (await h.core.listNamespacedPod({ namespace: h.ns, labelSelector: `app=${app}` })).items.filter((p) => !p.metadata?.deletionTimestamp);

describe("the Deployment controller's pods", () => {
  let h: Harness;
  beforeAll(async () => { h = await startHarness({ runtime: "process", workloadPods: true }); });
  afterAll(async () => { await h?.sim.stop(); });

  it("makes replicas pods of the template, owned as a ReplicaSet's, replaces them on a new template, and deletes them with the Deployment", async () => {
    const apps = h.kc.makeApiClient(AppsV1Api);
    const name = fresh("web");
    const template = (version: string) => ({
      metadata: { labels: { app: name }, annotations: { version } },
      spec: { containers: [{ name: "main", image: "debian:bookworm-slim", command: ["sleep", "300"] }] },
    });
    await apps.createNamespacedDeployment({ namespace: h.ns, body: { metadata: { name }, spec: { replicas: 2, selector: { matchLabels: { app: name } }, template: template("1") } } });
    const first = await waitFor("two pods", async () => { const p = await pods(h, name); return p.length === 2 ? p : undefined; });
    const hash = first[0]!.metadata!.labels!["pod-template-hash"]!;
    for (const p of first) {
      expect(p.metadata!.name).toMatch(new RegExp(`^${name}-${hash}-[0-9a-f]{5}$`));
      expect(p.metadata!.ownerReferences).toEqual([expect.objectContaining({ kind: "ReplicaSet", name: `${name}-${hash}`, controller: true })]);
      expect(p.metadata!.annotations!["version"]).toBe("1");
    }

    await apps.patchNamespacedDeployment({ namespace: h.ns, name, body: [{ op: "replace", path: "/spec/template/metadata/annotations/version", value: "2" }] });
    const second = await waitFor("two pods of the new template", async () => {
      const p = await pods(h, name);
      return p.length === 2 && p.every((x) => x.metadata!.annotations!["version"] === "2") ? p : undefined;
    });
    expect(second[0]!.metadata!.labels!["pod-template-hash"]).not.toBe(hash);

    // A pod deleted by someone is replaced.
    await h.core.deleteNamespacedPod({ namespace: h.ns, name: second[0]!.metadata!.name!, gracePeriodSeconds: 0 });
    await waitFor("a replacement", async () => {
      const p = await pods(h, name);
      return p.length === 2 && !p.some((x) => x.metadata!.name === second[0]!.metadata!.name) ? p : undefined;
    });

    await apps.deleteNamespacedDeployment({ namespace: h.ns, name });
    await waitFor("no pod left", async () => ((await pods(h, name)).length === 0 ? true : undefined));
  });

  it("creates them through admission: a mutating webhook's patch is on every pod", async () => {
    const certs = makeCerts();
    const server = createServer(certs.server(), (req, res) => {
      let body = "";
      req.on("data", (d: Buffer) => (body += d.toString()));
      req.on("end", () => {
        const review = JSON.parse(body) as { request: { uid: string } };
        const patch = Buffer.from(JSON.stringify([{ op: "add", path: "/metadata/labels/admitted", value: "yes" }])).toString("base64");
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response: { uid: review.request.uid, allowed: true, patchType: "JSONPatch", patch } }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      await fetch(`${h.sim.url}/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations`, {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ metadata: { name: fresh("labeller") }, webhooks: [{
          name: "label.example.com", clientConfig: { url, caBundle: Buffer.from(readFileSync(certs.files.ca, "utf8")).toString("base64") }, sideEffects: "None", admissionReviewVersions: ["v1"],
          rules: [{ operations: ["CREATE"], apiGroups: [""], apiVersions: ["v1"], resources: ["pods"] }],
          namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": h.ns } },
        }] }),
      }).then(async (r) => { if (r.status !== 201) throw new Error(`registering the webhook: ${r.status} ${await r.text()}`); });
      const apps = h.kc.makeApiClient(AppsV1Api);
      const name = fresh("admitted");
      await apps.createNamespacedDeployment({ namespace: h.ns, body: { metadata: { name }, spec: { selector: { matchLabels: { app: name } },
        template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: "main", image: "debian:bookworm-slim", command: ["sleep", "300"] }] } } } } });
      const [pod] = await waitFor("the pod", async () => { const p = await pods(h, name); return p.length === 1 ? p : undefined; });
      expect(pod!.metadata!.labels!["admitted"]).toBe("yes");
      await apps.deleteNamespacedDeployment({ namespace: h.ns, name });
    } finally {
      server.close();
      certs.remove();
    }
  });
});
