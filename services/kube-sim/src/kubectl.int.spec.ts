// The real kubectl (v1.32) against the simulator: get, describe, logs -f, get -w, delete,
// and apply twice (the second a change, sent as a strategic merge patch).
import { execFile, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
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
