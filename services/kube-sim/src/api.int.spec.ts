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
    // Started again after an error until the test stops it: the stop's own abort comes back as an error, and
    // restarting on that left the informer connecting to the stopped simulator in a loop, a busy worker for every
    // suite after this one.
    let stopped = false;
    informer.on("error", () => { if (!stopped) void informer.start(); });
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
      stopped = true;
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

describe("refusals as a real API server answers them", () => {
  const MiB = 1024 * 1024;
  const post = (path: string, body: string, contentType = "application/json") =>
    fetch(`${h.sim.url}${path}`, { method: "POST", body, headers: { "Content-Type": contentType } });

  it("refuses a Secret or ConfigMap over 1 MiB of data with 422 Invalid, naming the field", async () => {
    const big = "x".repeat(MiB / 2 + 1);
    const err = await rejection(h.core.createNamespacedSecret({ namespace: h.ns, body: { metadata: { name: "big" }, stringData: { a: big, b: big } } }));
    expect(statusOf(err)).toEqual({
      kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", reason: "Invalid", code: 422,
      message: 'Secret "big" is invalid: data: Too long: must have at most 1048576 bytes',
      details: { name: "big", kind: "Secret", causes: [{ reason: "FieldValueTooLong", message: "Too long: must have at most 1048576 bytes", field: "data" }] },
    });
    const cm = await rejection(h.core.createNamespacedConfigMap({ namespace: h.ns, body: { metadata: { name: "big" }, data: { a: big }, binaryData: { b: Buffer.from(big).toString("base64") } } }));
    expect(statusOf(cm)).toMatchObject({
      reason: "Invalid", code: 422, message: 'ConfigMap "big" is invalid: []: Too long: must have at most 1048576 bytes',
      details: { causes: [{ reason: "FieldValueTooLong", field: "[]" }] },
    });
    // Exactly 1 MiB is allowed.
    await h.core.createNamespacedSecret({ namespace: h.ns, body: { metadata: { name: "max" }, stringData: { a: "y".repeat(MiB) } } });
  });

  it("refuses a request body over 3 MiB with 413 RequestEntityTooLarge", async () => {
    const res = await post(`/api/v1/namespaces/${h.ns}/configmaps`, JSON.stringify({ metadata: { name: "huge" }, data: { a: "z".repeat(3 * MiB) } }));
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual({
      kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", reason: "RequestEntityTooLarge", code: 413,
      message: "Request entity too large: limit is 3145728",
    });
    expect((await h.core.listNamespacedConfigMap({ namespace: h.ns, fieldSelector: "metadata.name=huge" })).items).toEqual([]);
  });

  it("refuses invalid and over-long names per kind with 422 on metadata.name", async () => {
    const subdomain = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    const secret = await rejection(h.core.createNamespacedSecret({ namespace: h.ns, body: { metadata: { name: "Bad_Name" } } }));
    expect(statusOf(secret)).toEqual({
      kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", reason: "Invalid", code: 422,
      message: `Secret "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": ${subdomain}`,
      details: { name: "Bad_Name", kind: "Secret", causes: [{ reason: "FieldValueInvalid", message: `Invalid value: "Bad_Name": ${subdomain}`, field: "metadata.name" }] },
    });
    const long = "n".repeat(64);
    const ns = await rejection(h.core.createNamespace({ body: { metadata: { name: long } } }));
    // The name is also the value of the label kubernetes.io/metadata.name the server sets: both are named.
    expect(statusOf(ns)).toMatchObject({
      code: 422, reason: "Invalid",
      message: `Namespace "${long}" is invalid: [metadata.name: Invalid value: "${long}": must be no more than 63 characters, metadata.labels: Invalid value: "${long}": must be no more than 63 characters]`,
    });
    const svc = await rejection(h.core.createNamespacedService({ namespace: h.ns, body: { metadata: { name: "1web" }, spec: { ports: [{ port: 80 }] } } }));
    expect(statusOf(svc)).toMatchObject({ code: 422, message: expect.stringContaining(`Service "1web" is invalid: metadata.name: Invalid value: "1web": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character`) });
    const tooLong = `${"a".repeat(250)}.com`;
    const cm = await rejection(h.core.createNamespacedConfigMap({ namespace: h.ns, body: { metadata: { name: tooLong } } }));
    expect(statusOf(cm)).toMatchObject({ code: 422, details: { causes: [{ field: "metadata.name", message: `Invalid value: "${tooLong}": must be no more than 253 characters` }] } });
    // A name that is fine for a config map is not for a namespace (a label: no dots).
    const dotted = await rejection(h.core.createNamespace({ body: { metadata: { name: "a.b" } } }));
    expect(statusOf(dotted)).toMatchObject({ code: 422, message: expect.stringContaining("a lowercase RFC 1123 label must consist of") });
    await h.core.createNamespacedConfigMap({ namespace: h.ns, body: { metadata: { name: "a.b" } } });
  });

  it("refuses invalid label values and keys with 422 on metadata.labels", async () => {
    const err = await rejection(h.core.createNamespacedConfigMap({ namespace: h.ns, body: { metadata: { name: fresh("l"), labels: { ok: "yes", bad: "not valid!" } } } }));
    expect(statusOf(err)).toMatchObject({
      code: 422, reason: "Invalid",
      details: { causes: [{ reason: "FieldValueInvalid", field: "metadata.labels", message: expect.stringMatching(/^Invalid value: "not valid!": a valid label must be an empty string or consist of alphanumeric characters/) }] },
    });
    const key = await rejection(h.core.createNamespacedConfigMap({ namespace: h.ns, body: { metadata: { name: fresh("l"), labels: { "-bad": "v" } } } }));
    expect(statusOf(key)).toMatchObject({ code: 422, details: { causes: [{ field: "metadata.labels", message: expect.stringContaining('Invalid value: "-bad": name part must consist of alphanumeric characters') }] } });
  });

  it("refuses a change to an immutable pod field with 422 Forbidden, and takes a new image", async () => {
    const name = fresh("imm");
    const created = await h.core.createNamespacedPod({ namespace: h.ns, body: { metadata: { name }, spec: { restartPolicy: "Never", containers: [{ name: "main", image: "x:1", command: ["sleep", "30"] }] } } });
    const changed = structuredClone(created);
    changed.spec!.containers[0]!.command = ["sleep", "60"];
    delete changed.metadata!.resourceVersion; // the kubelet writes the status meanwhile
    const err = await rejection(h.core.replaceNamespacedPod({ name, namespace: h.ns, body: changed }));
    const forbidden = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";
    expect(statusOf(err)).toMatchObject({
      code: 422, reason: "Invalid", message: expect.stringContaining(`Pod "${name}" is invalid: spec: Forbidden: ${forbidden}`),
      details: { name, kind: "Pod", causes: [{ reason: "FieldValueForbidden", field: "spec", message: expect.stringContaining(`Forbidden: ${forbidden}`) }] },
    });
    const image = await h.core.patchNamespacedPod({ name, namespace: h.ns, body: { spec: { containers: [{ name: "main", image: "x:2" }], activeDeadlineSeconds: 100 } } },
      setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch));
    expect(image.spec?.containers[0]?.image).toBe("x:2");
    expect(image.spec?.activeDeadlineSeconds).toBe(100);
    await h.core.deleteNamespacedPod({ name, namespace: h.ns, gracePeriodSeconds: 0 });
  });

  it("refuses a data change to an immutable Secret or ConfigMap with 422, and taking immutable back", async () => {
    const name = fresh("frozen");
    await h.core.createNamespacedSecret({ namespace: h.ns, body: { metadata: { name }, immutable: true, stringData: { a: "1" } } });
    const err = await rejection(h.core.patchNamespacedSecret({ name, namespace: h.ns, body: { stringData: { a: "2" } } }, setHeaderOptions("Content-Type", PatchStrategy.MergePatch)));
    expect(statusOf(err)).toMatchObject({
      code: 422, reason: "Invalid", message: `Secret "${name}" is invalid: data: Forbidden: field is immutable when \`immutable\` is set`,
      details: { causes: [{ reason: "FieldValueForbidden", field: "data" }] },
    });
    const back = await rejection(h.core.patchNamespacedSecret({ name, namespace: h.ns, body: { immutable: false } }, setHeaderOptions("Content-Type", PatchStrategy.MergePatch)));
    expect(statusOf(back)).toMatchObject({ code: 422, details: { causes: [{ field: "immutable" }] } });
    // Metadata may still change.
    const labelled = await h.core.patchNamespacedSecret({ name, namespace: h.ns, body: { metadata: { labels: { a: "b" } } } }, setHeaderOptions("Content-Type", PatchStrategy.MergePatch));
    expect(labelled.metadata?.labels).toEqual({ a: "b" });

    await h.core.createNamespacedConfigMap({ namespace: h.ns, body: { metadata: { name }, immutable: true, data: { a: "1" } } });
    const cm = await rejection(h.core.replaceNamespacedConfigMap({ name, namespace: h.ns, body: { metadata: { name }, immutable: true, data: { a: "2" } } }));
    expect(statusOf(cm)).toMatchObject({ code: 422, message: `ConfigMap "${name}" is invalid: data: Forbidden: field is immutable when \`immutable\` is set` });
    expect((await h.core.readNamespacedConfigMap({ name, namespace: h.ns })).data).toEqual({ a: "1" });
  });

  it("answers a body in a media type it cannot read with 415 UnsupportedMediaType", async () => {
    const res = await post(`/api/v1/namespaces/${h.ns}/configmaps`, "a: b", "application/cbor");
    expect(res.status).toBe(415);
    expect(await res.json()).toMatchObject({ kind: "Status", reason: "UnsupportedMediaType", code: 415, message: expect.stringContaining("the body of the request was in an unknown format - accepted media types include: application/json") });
  });
});
