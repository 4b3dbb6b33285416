// The simulated API server through @kubernetes/client-node: CRUD and the Status shapes of
// its errors, patches, selectors, watches, 410 after compaction, injected errors, stats.
import { AppsV1Api, PatchStrategy, Watch, makeInformer, setHeaderOptions, type V1ConfigMap } from "@kubernetes/client-node";
import { fresh, rejection, sim, startHarness, statusOf, waitFor, type Harness } from "./sim.testkit.js";

let h: Harness;
beforeAll(async () => { h = await startHarness(); });
afterAll(async () => { await h.sim.stop(); });

const cm = (name: string, data: Record<string, string>, labels?: Record<string, string>): V1ConfigMap =>
  ({ metadata: { name, ...(labels ? { labels } : {}) }, data });

describe("CRUD", () => {
  it("creates, reads, updates with resourceVersion checks and deletes, answering errors as Status objects", async () => {
    const name = fresh("cm");
    const created = await h.core.createNamespacedConfigMap({ namespace: h.ns, body: cm(name, { a: "1" }) });
    expect(created.metadata?.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(Number(created.metadata?.resourceVersion)).toBeGreaterThan(0);
    expect(created.metadata?.creationTimestamp).toBeInstanceOf(Date);

    const dup = await rejection(h.core.createNamespacedConfigMap({ namespace: h.ns, body: cm(name, {}) }));
    expect(statusOf(dup)).toEqual({
      kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: `configmaps "${name}" already exists`,
      reason: "AlreadyExists", details: { name, kind: "configmaps" }, code: 409,
    });

    const updated = await h.core.replaceNamespacedConfigMap({ name, namespace: h.ns, body: { ...created, data: { a: "2" } } });
    expect(Number(updated.metadata?.resourceVersion)).toBeGreaterThan(Number(created.metadata?.resourceVersion));
    const stale = await rejection(h.core.replaceNamespacedConfigMap({ name, namespace: h.ns, body: { ...created, data: { a: "3" } } }));
    expect(statusOf(stale)).toMatchObject({ reason: "Conflict", code: 409 });

    await h.core.deleteNamespacedConfigMap({ name, namespace: h.ns });
    const gone = await rejection(h.core.readNamespacedConfigMap({ name, namespace: h.ns }));
    expect((gone as { code: number }).code).toBe(404);
    expect(statusOf(gone)).toEqual({
      kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: `configmaps "${name}" not found`,
      reason: "NotFound", details: { name, kind: "configmaps" }, code: 404,
    });
  });

  it("refuses an object in a namespace that does not exist, as the real server does", async () => {
    const err = await rejection(h.core.createNamespacedSecret({ namespace: "nowhere", body: { metadata: { name: "s" } } }));
    expect(statusOf(err)).toMatchObject({ reason: "NotFound", code: 404, message: 'namespaces "nowhere" not found' });
  });

  it("applies strategic merge, merge and JSON patches", async () => {
    const apps = h.kc.makeApiClient(AppsV1Api);
    const name = fresh("deploy");
    const container = (n: string, image: string) => ({ name: n, image });
    await apps.createNamespacedDeployment({ namespace: h.ns, body: {
      metadata: { name, labels: { app: "x" } },
      spec: { selector: { matchLabels: { app: "x" } }, template: { metadata: { labels: { app: "x" } }, spec: { containers: [container("a", "a:1"), container("b", "b:1")] } } },
    } });
    const smp = await apps.patchNamespacedDeployment({ name, namespace: h.ns, body: { spec: { template: { spec: { containers: [{ name: "b", image: "b:2" }] } } } } },
      setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch));
    // Merged by name: a kept, b changed (a merge patch would have replaced the list).
    expect(smp.spec?.template.spec?.containers.map((c) => `${c.name}=${c.image}`)).toEqual(["a=a:1", "b=b:2"]);
    expect(smp.metadata?.generation).toBe(2);
    const merge = await apps.patchNamespacedDeployment({ name, namespace: h.ns, body: { metadata: { labels: { app: null, tier: "web" } } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch));
    expect(merge.metadata?.labels).toEqual({ tier: "web" });
    const json = await apps.patchNamespacedDeployment({ name, namespace: h.ns, body: [{ op: "replace", path: "/spec/replicas", value: 3 }] },
      setHeaderOptions("Content-Type", PatchStrategy.JsonPatch));
    expect(json.spec?.replicas).toBe(3);
  });

  it("lists with label and field selectors", async () => {
    const tag = fresh("sel");
    await h.core.createNamespacedConfigMap({ namespace: h.ns, body: cm(`${tag}-1`, {}, { t: tag, env: "x", f: "1" }) });
    await h.core.createNamespacedConfigMap({ namespace: h.ns, body: cm(`${tag}-2`, {}, { t: tag, env: "y" }) });
    await h.core.createNamespacedConfigMap({ namespace: h.ns, body: cm(`${tag}-3`, {}, { t: tag, env: "z", f: "1" }) });
    const names = async (labelSelector: string, fieldSelector?: string) =>
      (await h.core.listNamespacedConfigMap({ namespace: h.ns, labelSelector, ...(fieldSelector ? { fieldSelector } : {}) })).items.map((i) => i.metadata?.name).sort();
    expect(await names(`t=${tag},env in (x,y),f`)).toEqual([`${tag}-1`]);
    expect(await names(`t=${tag},env!=y`)).toEqual([`${tag}-1`, `${tag}-3`]);
    expect(await names(`t=${tag},!f`)).toEqual([`${tag}-2`]);
    expect(await names(`t=${tag}`, `metadata.name=${tag}-2`)).toEqual([`${tag}-2`]);
    expect(await names(`t=${tag}`, `metadata.namespace=${h.ns},metadata.name!=${tag}-2`)).toEqual([`${tag}-1`, `${tag}-3`]);
  });
});

describe("watch", () => {
  it("streams ADDED, MODIFIED and DELETED from a resourceVersion", async () => {
    const name = fresh("w");
    const list = await h.core.listNamespacedConfigMap({ namespace: h.ns });
    const events: string[] = [];
    const req = await new Watch(h.kc).watch(`/api/v1/namespaces/${h.ns}/configmaps`, { resourceVersion: list.metadata!.resourceVersion!, fieldSelector: `metadata.name=${name}` },
      (type, obj: V1ConfigMap) => events.push(`${type} ${obj.metadata?.name} ${JSON.stringify(obj.data ?? {})}`), () => undefined);
    try {
      await h.core.createNamespacedConfigMap({ namespace: h.ns, body: cm(name, { v: "1" }) });
      await h.core.patchNamespacedConfigMap({ name, namespace: h.ns, body: { data: { v: "2" } } }, setHeaderOptions("Content-Type", PatchStrategy.MergePatch));
      await h.core.deleteNamespacedConfigMap({ name, namespace: h.ns });
      await waitFor("three events", () => events.length >= 3);
      expect(events).toEqual([`ADDED ${name} {"v":"1"}`, `MODIFIED ${name} {"v":"2"}`, `DELETED ${name} {"v":"2"}`]);
    } finally { req.abort(); }
  });

  it("answers a watch from before a compaction with 410 Expired, and an informer re-lists", async () => {
    const rv = (await h.core.listNamespacedConfigMap({ namespace: h.ns })).metadata!.resourceVersion!;
    await h.core.createNamespacedConfigMap({ namespace: h.ns, body: cm(fresh("c"), {}) });
    await sim(h, "/sim/compact", "POST");
    const text = await (await fetch(`${h.sim.url}/api/v1/namespaces/${h.ns}/configmaps?watch=true&resourceVersion=${rv}`)).text();
    const event = JSON.parse(text.trim()) as { type: string; object: Record<string, unknown> };
    expect(event.type).toBe("ERROR");
    expect(event.object).toMatchObject({ kind: "Status", status: "Failure", reason: "Expired", code: 410 });

    // An informer whose watch is cut after a compaction resumes from a resourceVersion now too old: 410, so it lists again.
    const ns = fresh("inf");
    await h.core.createNamespace({ body: { metadata: { name: ns } } });
    await h.core.createNamespacedConfigMap({ namespace: ns, body: cm("a", {}) });
    await sim(h, "/sim/stats/reset", "POST");
    const informer = makeInformer(h.kc, `/api/v1/namespaces/${ns}/configmaps`, () => h.core.listNamespacedConfigMap({ namespace: ns }));
    informer.on("error", () => { void informer.start(); });
    await informer.start();
    try {
      await h.core.createNamespacedConfigMap({ namespace: ns, body: cm("b", {}) });
      await waitFor("b in the cache", () => informer.get("b", ns));
      // A change the informer does not watch, so the resourceVersion it resumes from is older than the compaction.
      await h.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: "elsewhere" } } });
      await sim(h, "/sim/compact", "POST");
      await sim(h, "/sim/watches/drop", "POST");
      await waitFor("a re-list after the 410", async () => ((await (await sim(h, "/sim/stats")).json()) as { calls: Record<string, number> }).calls["list configmaps"] === 2);
      // And it watches on from the new list.
      await h.core.createNamespacedConfigMap({ namespace: ns, body: cm("c", {}) });
      await waitFor("c in the cache", () => informer.get("c", ns));
      expect(informer.list(ns).map((o) => o.metadata?.name).sort()).toEqual(["a", "b", "c"]);
    } finally {
      await informer.stop();
      await sim(h, "/sim/faults", "DELETE");
    }
  });
});

describe("faults and stats", () => {
  it("fails exactly the next n matching requests with the injected codes; 429 says when to retry", async () => {
    await sim(h, "/sim/faults", "POST", { apiErrors: { next: 2, codes: [500, 429], verbs: ["get"], resources: ["configmaps"] } });
    try {
      const name = fresh("f");
      await h.core.createNamespacedConfigMap({ namespace: h.ns, body: cm(name, {}) });
      const first = await rejection(h.core.readNamespacedConfigMap({ name, namespace: h.ns }));
      expect((first as { code: number }).code).toBe(500);
      const second = await fetch(`${h.sim.url}/api/v1/namespaces/${h.ns}/configmaps/${name}`);
      expect(second.status).toBe(429);
      expect(second.headers.get("retry-after")).toBe("1");
      expect(await second.json()).toMatchObject({ kind: "Status", reason: "TooManyRequests", code: 429 });
      expect((await h.core.readNamespacedConfigMap({ name, namespace: h.ns })).metadata?.name).toBe(name);
    } finally { await sim(h, "/sim/faults", "DELETE"); }
  });

  it("counts API calls by verb and resource, and not the kubelet's own writes", async () => {
    await sim(h, "/sim/stats/reset", "POST");
    const name = fresh("p");
    await h.core.createNamespacedPod({ namespace: h.ns, body: { metadata: { name }, spec: { restartPolicy: "Never", containers: [{ name: "main", image: "x", command: ["true"] }] } } });
    await waitFor("the pod to succeed", async () => (await h.core.readNamespacedPod({ name, namespace: h.ns })).status?.phase === "Succeeded");
    const gets = ((await (await sim(h, "/sim/stats")).json()) as { calls: Record<string, number> }).calls["get pods"]!;
    await h.core.listNamespacedPod({ namespace: h.ns });
    await h.core.readNamespacedPodLog({ name, namespace: h.ns });
    await h.core.deleteNamespacedPod({ name, namespace: h.ns });
    const stats = (await (await sim(h, "/sim/stats")).json()) as { calls: Record<string, number>; containersStarted: number };
    expect(stats.calls).toEqual({ "create pods": 1, "get pods": gets, "list pods": 1, "get pods/log": 1, "delete pods": 1 });
    expect(stats.containersStarted).toBeGreaterThanOrEqual(1);
  });
});
