// The real kubectl (v1.32) against the simulator: get, describe, logs -f, get -w, delete,
// apply twice (the second a change, sent as a strategic merge patch), every `kubectl create`
// generator (whose bodies kubectl sends as protobuf), edit, patch, label and annotate.
import { execFile, execFileSync, spawn } from "node:child_process";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { fresh, podWhere, startHarness, waitFor, type Harness } from "./sim.testkit.js";

const run = promisify(execFile);
let h: Harness;
beforeAll(async () => { h = await startHarness(); });
afterAll(async () => { await h.sim.stop(); });

const kubectl = async (...args: string[]) => (await run("kubectl", ["--kubeconfig", h.sim.kubeconfigPath, "-n", h.ns, ...args], { timeout: 20000 })).stdout;

it("gets, describes, follows the logs of and deletes a pod", async () => {
  const name = fresh("k");
  await kubectl("run", name, "--image=busybox", "--restart=Never", "--command", "--", "sh", "-c", "for i in 1 2 3; do echo l$i; sleep 0.2; done");
  expect(await kubectl("logs", name, "-c", name, "-f")).toBe("l1\nl2\nl3\n");
  await podWhere(h, name, (p) => p.status?.phase === "Succeeded", "Succeeded");
  expect(await kubectl("get", "pods")).toMatch(new RegExp(`^NAME\\s+READY\\s+STATUS\\s+RESTARTS\\s+AGE\\n${name}\\s+0/1\\s+Completed\\s+0\\s+\\d+s`));
  const json = JSON.parse(await kubectl("get", "pods", "-o", "json")) as { items: Array<{ metadata: { name: string }; status: { phase: string } }> };
  expect(json.items.map((p) => [p.metadata.name, p.status.phase])).toEqual([[name, "Succeeded"]]);
  const described = await kubectl("describe", "pod", name);
  expect(described).toMatch(/Status:\s+Succeeded/);
  expect(described).toMatch(/Node:\s+kube-sim\/127\.0\.0\.1/);
  expect(await kubectl("delete", "pod", name)).toBe(`pod "${name}" deleted\n`);
  expect(await kubectl("get", "pods", "-o", "name")).toBe("");
});

it("watches pods with get -w", async () => {
  const name = fresh("w");
  const watches = () => h.sim.stats().calls["watch pods"] ?? 0;
  const before = watches();
  const watch = spawn("kubectl", ["--kubeconfig", h.sim.kubeconfigPath, "-n", h.ns, "get", "pods", "-w"]);
  let out = "";
  watch.stdout.on("data", (d: Buffer) => { out += d.toString(); });
  try {
    // The pod is made once kubectl watches, so its first state (Pending) is one kubectl sees.
    await waitFor("kubectl's watch", () => watches() > before);
    await kubectl("run", name, "--image=busybox", "--restart=Never", "--command", "--", "true");
    await waitFor("Completed in the watch", () => new RegExp(`${name}\\s+0/1\\s+Completed`).test(out));
    expect(out.split("\n")[0]).toMatch(/^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE$/);
    expect(out).toMatch(new RegExp(`${name}\\s+0/1\\s+Pending`));
  } finally { watch.kill(); }
});

it("applies a Namespace, ConfigMap, Secret, Deployment and Service, then a change to them", async () => {
  const ns = fresh("app");
  const manifest = (image: string, value: string) => `
apiVersion: v1
kind: Namespace
metadata: {name: ${ns}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg, namespace: ${ns}}
data: {a: "${value}"}
---
apiVersion: v1
kind: Secret
metadata: {name: sec, namespace: ${ns}}
stringData: {pw: "${value}"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ${ns}}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "${image}"}, {name: log, image: "log:1"}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: ${ns}}
spec: {selector: {app: web}, ports: [{port: 80}]}
`;
  const file = join(h.sim.dataDir, `${ns}.yaml`);
  writeFileSync(file, manifest("nginx:1", "1"));
  expect(await kubectl("-n", ns, "apply", "-f", file)).toContain(`deployment.apps/web created`);
  writeFileSync(file, manifest("nginx:2", "2"));
  expect(await kubectl("-n", ns, "apply", "-f", file)).toContain(`deployment.apps/web configured`);
  interface Item { kind: string; metadata: { name: string; generation?: number }; spec?: { template?: { spec: { containers: Array<{ image: string }> } }; ports?: Array<{ port: number }> }; data?: Record<string, string> }
  const got = JSON.parse(await kubectl("-n", ns, "get", "deploy,svc,secret,cm", "-o", "json")) as { items: Item[] };
  const byKind = Object.fromEntries(got.items.map((i) => [`${i.kind}/${i.metadata.name}`, i]));
  expect(byKind["Deployment/web"]?.spec?.template?.spec.containers.map((c) => c.image)).toEqual(["nginx:2", "log:1"]);
  expect(byKind["Deployment/web"]?.metadata.generation).toBe(2);
  expect(byKind["ConfigMap/cfg"]?.data).toEqual({ a: "2" });
  expect(Buffer.from(byKind["Secret/sec"]?.data?.["pw"] ?? "", "base64").toString()).toBe("2");
  expect(byKind["Service/web"]?.spec?.ports?.[0]?.port).toBe(80);
});

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const getJson = async (ns: string, what: string) => JSON.parse(await kubectl("-n", ns, "get", what, "-o", "json")) as Json;
const b64 = (s: string) => Buffer.from(s).toString("base64");

describe("kubectl create (protobuf bodies)", () => {
  it("creates a namespace, secrets and config maps from literals and files", async () => {
    const ns = fresh("gen");
    expect(await kubectl("create", "namespace", ns)).toBe(`namespace/${ns} created\n`);
    expect((await getJson(ns, `namespace/${ns}`))["status"]).toEqual({ phase: "Active" });

    const file = join(h.sim.dataDir, `${ns}.conf`);
    writeFileSync(file, "line 1\nline 2\n");
    await kubectl("-n", ns, "create", "secret", "generic", "lit", "--from-literal=user=admin", "--from-literal=pw=s3cret", `--from-file=app.conf=${file}`);
    const secret = await getJson(ns, "secret/lit");
    expect(secret).toMatchObject({ kind: "Secret", type: "Opaque", metadata: { name: "lit", namespace: ns } });
    expect(secret["data"]).toEqual({ user: b64("admin"), pw: b64("s3cret"), "app.conf": b64("line 1\nline 2\n") });

    await kubectl("-n", ns, "create", "configmap", "cfg", "--from-literal=a=1", "--from-literal=b=", `--from-file=${file}`);
    const cm = await getJson(ns, "configmap/cfg");
    expect(cm["data"]).toEqual({ a: "1", b: "", [`${ns}.conf`]: "line 1\nline 2\n" });
    expect(cm["metadata"]["creationTimestamp"]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);

    const dir = h.sim.dataDir;
    execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
      "-subj", "/CN=kube-sim-test", "-keyout", join(dir, `${ns}.key`), "-out", join(dir, `${ns}.crt`)], { stdio: "ignore" });
    await kubectl("-n", ns, "create", "secret", "tls", "tls", `--cert=${join(dir, `${ns}.crt`)}`, `--key=${join(dir, `${ns}.key`)}`);
    const tls = await getJson(ns, "secret/tls");
    expect(tls["type"]).toBe("kubernetes.io/tls");
    expect(tls["data"]).toEqual({ "tls.crt": b64(readFileSync(join(dir, `${ns}.crt`), "utf8")), "tls.key": b64(readFileSync(join(dir, `${ns}.key`), "utf8")) });

    await kubectl("-n", ns, "create", "secret", "docker-registry", "reg", "--docker-server=registry.example", "--docker-username=u", "--docker-password=p");
    const reg = await getJson(ns, "secret/reg");
    expect(reg["type"]).toBe("kubernetes.io/dockerconfigjson");
    const auths = JSON.parse(Buffer.from(reg["data"][".dockerconfigjson"], "base64").toString()) as Json;
    expect(auths).toEqual({ auths: { "registry.example": { username: "u", password: "p", auth: b64("u:p") } } });
  });

  it("creates a deployment, services, a service account, a role and binding, a job and a cron job", async () => {
    const ns = fresh("gen");
    await kubectl("create", "namespace", ns);
    await kubectl("-n", ns, "create", "deployment", "web", "--image=nginx:1", "--replicas=2", "--port=80");
    const deploy = await getJson(ns, "deployment/web");
    expect(deploy["spec"]).toMatchObject({
      replicas: 2, selector: { matchLabels: { app: "web" } },
      template: { metadata: { labels: { app: "web" } }, spec: { containers: [{ name: "nginx", image: "nginx:1", ports: [{ containerPort: 80 }] }] } },
    });
    expect(deploy["metadata"]).toMatchObject({ labels: { app: "web" }, generation: 1 });

    await kubectl("-n", ns, "create", "service", "clusterip", "web", "--tcp=80:8080");
    expect((await getJson(ns, "service/web"))["spec"]).toMatchObject({
      type: "ClusterIP", selector: { app: "web" }, ports: [{ name: "80-8080", port: 80, targetPort: 8080, protocol: "TCP" }],
    });
    await kubectl("-n", ns, "create", "service", "nodeport", "np", "--tcp=443:https", "--node-port=30443");
    expect((await getJson(ns, "service/np"))["spec"]).toMatchObject({
      type: "NodePort", ports: [{ port: 443, targetPort: "https", nodePort: 30443, protocol: "TCP" }],
    });

    await kubectl("-n", ns, "create", "serviceaccount", "bot");
    expect((await getJson(ns, "serviceaccount/bot"))["metadata"]).toMatchObject({ name: "bot", namespace: ns });

    await kubectl("-n", ns, "create", "role", "reader", "--verb=get,list", "--resource=pods,deployments.apps");
    expect((await getJson(ns, "role/reader"))["rules"]).toEqual([
      { verbs: ["get", "list"], apiGroups: [""], resources: ["pods"] },
      { verbs: ["get", "list"], apiGroups: ["apps"], resources: ["deployments"] },
    ]);
    await kubectl("-n", ns, "create", "rolebinding", "read", "--role=reader", `--serviceaccount=${ns}:bot`);
    expect(await getJson(ns, "rolebinding/read")).toMatchObject({
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "reader" },
      subjects: [{ kind: "ServiceAccount", name: "bot", namespace: ns }],
    });

    await kubectl("-n", ns, "create", "cronjob", "nightly", "--image=busybox", "--schedule=0 3 * * *", "--", "echo", "hi");
    const cron = await getJson(ns, "cronjob/nightly");
    expect(cron["spec"]).toMatchObject({
      schedule: "0 3 * * *",
      jobTemplate: { metadata: { name: "nightly" }, spec: { template: { spec: { restartPolicy: "OnFailure", containers: [{ name: "nightly", image: "busybox", command: ["echo", "hi"] }] } } } },
    });
    await kubectl("-n", ns, "create", "job", "once", "--from=cronjob/nightly");
    const job = await getJson(ns, "job/once");
    expect(job["metadata"]["annotations"]).toEqual({ "cronjob.kubernetes.io/instantiate": "manual" });
    expect(job["metadata"]["ownerReferences"]).toEqual([expect.objectContaining({ kind: "CronJob", name: "nightly", controller: true })]);
    expect(job["spec"]["template"]["spec"]["containers"]).toEqual([expect.objectContaining({ name: "nightly", image: "busybox", command: ["echo", "hi"] })]);
  });

  it("refuses a kind it does not serve as a real server does: 404 for the resource type", async () => {
    const refused = await run("kubectl", ["--kubeconfig", h.sim.kubeconfigPath, "create", "priorityclass", fresh("pc"), "--value=10"]).catch((e: { stderr: string }) => e);
    expect((refused as { stderr: string }).stderr).toBe("error: failed to create priorityclass: the server could not find the requested resource\n");
  });
});

describe("kubectl edit, patch, label, annotate", () => {
  it("edits through KUBE_EDITOR, patches three ways, labels and annotates", async () => {
    const ns = fresh("chg");
    await kubectl("create", "namespace", ns);
    await kubectl("-n", ns, "create", "deployment", "web", "--image=nginx:1");

    const editor = join(h.sim.dataDir, `${ns}-editor.sh`);
    writeFileSync(editor, "#!/bin/sh\nsed -i 's/image: nginx:1/image: nginx:2/' \"$1\"\n");
    chmodSync(editor, 0o755);
    const edited = await run("kubectl", ["--kubeconfig", h.sim.kubeconfigPath, "-n", ns, "edit", "deployment/web"], { env: { ...process.env, KUBE_EDITOR: editor }, timeout: 20000 });
    expect(edited.stdout).toBe("deployment.apps/web edited\n");
    expect((await getJson(ns, "deployment/web"))["spec"]["template"]["spec"]["containers"][0]["image"]).toBe("nginx:2");

    await kubectl("-n", ns, "patch", "deployment", "web", "-p", '{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:3"}]}}}}');
    await kubectl("-n", ns, "patch", "deployment", "web", "--type=merge", "-p", '{"spec":{"replicas":4}}');
    await kubectl("-n", ns, "patch", "deployment", "web", "--type=json", "-p", '[{"op":"add","path":"/spec/minReadySeconds","value":5}]');
    await kubectl("-n", ns, "label", "deployment", "web", "tier=front");
    await kubectl("-n", ns, "annotate", "deployment", "web", "owner=team-a");
    const deploy = await getJson(ns, "deployment/web");
    expect(deploy["spec"]).toMatchObject({ replicas: 4, minReadySeconds: 5, template: { spec: { containers: [{ name: "nginx", image: "nginx:3" }] } } });
    expect(deploy["metadata"]["labels"]).toEqual({ app: "web", tier: "front" });
    expect(deploy["metadata"]["annotations"]).toMatchObject({ owner: "team-a" });

    await kubectl("-n", ns, "label", "deployment", "web", "tier-");
    await kubectl("-n", ns, "annotate", "deployment", "web", "owner=team-b", "--overwrite");
    const after = await getJson(ns, "deployment/web");
    expect(after["metadata"]["labels"]).toEqual({ app: "web" });
    expect(after["metadata"]["annotations"]["owner"]).toBe("team-b");
  });
});
