// The simulator's stand-in workload controller: Deployments and StatefulSets are reported
// rolled out and available per generation (kubectl rollout status agrees), or never
// available when annotated so.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { fresh, startHarness, type Harness } from "./sim.testkit.js";

const run = promisify(execFile);
let h: Harness;
beforeAll(async () => { h = await startHarness(); });
afterAll(async () => { await h.sim.stop(); });

const kubectl = async (args: string[], input?: string) => {
  const p = run("kubectl", ["--kubeconfig", h.sim.kubeconfigPath, "-n", h.ns, ...args], { timeout: 20_000 });
  if (input !== undefined) { p.child.stdin!.end(input); }
  return (await p).stdout;
};
const deployment = (name: string, replicas: number, annotations = "") => `
apiVersion: apps/v1
kind: Deployment
metadata: {name: ${name}${annotations ? `, annotations: {${annotations}}` : ""}}
spec:
  replicas: ${replicas}
  selector: {matchLabels: {app: ${name}}}
  template:
    metadata: {labels: {app: ${name}}}
    spec: {containers: [{name: web, image: "nginx:1.27"}]}
`;

it("reports each generation of a Deployment rolled out and available, as kubectl rollout status reads it", async () => {
  const name = fresh("d");
  await kubectl(["apply", "-f", "-"], deployment(name, 2));
  expect(await kubectl(["rollout", "status", `deployment/${name}`, "--timeout=10s"])).toContain("successfully rolled out");
  const first = JSON.parse(await kubectl(["get", "deployment", name, "-o", "json"])) as { metadata: { generation: number }; status: Record<string, unknown> };
  expect(first.status).toMatchObject({ observedGeneration: first.metadata.generation, replicas: 2, availableReplicas: 2, updatedReplicas: 2 });
  await kubectl(["apply", "-f", "-"], deployment(name, 3));
  expect(await kubectl(["rollout", "status", `deployment/${name}`, "--timeout=10s"])).toContain("successfully rolled out");
  const second = JSON.parse(await kubectl(["get", "deployment", name, "-o", "json"])) as { metadata: { generation: number }; status: Record<string, unknown> };
  expect(second.metadata.generation).toBeGreaterThan(first.metadata.generation);
  expect(second.status).toMatchObject({ observedGeneration: second.metadata.generation, availableReplicas: 3 });
});

it("reports a Deployment annotated unavailable as never available", async () => {
  const name = fresh("u");
  await kubectl(["apply", "-f", "-"], deployment(name, 1, '"sim.ephemera.dev/unavailable": "true"'));
  const failed = await run("kubectl", ["--kubeconfig", h.sim.kubeconfigPath, "-n", h.ns, "rollout", "status", `deployment/${name}`, "--timeout=2s"]).then(() => "rolled out", (e: { stderr: string }) => e.stderr);
  expect(failed).toMatch(/timed out|exceeded/);
  const d = JSON.parse(await kubectl(["get", "deployment", name, "-o", "json"])) as { status: Record<string, unknown> };
  expect(d.status).toMatchObject({ availableReplicas: 0, conditions: expect.arrayContaining([expect.objectContaining({ type: "Available", status: "False" })]) });
  // The annotation is the switch: set to "false" (the same generation), the Deployment becomes available.
  await kubectl(["apply", "-f", "-"], deployment(name, 1, '"sim.ephemera.dev/unavailable": "false"'));
  expect(await kubectl(["rollout", "status", `deployment/${name}`, "--timeout=10s"])).toContain("successfully rolled out");
});

it("reports a Deployment annotated progress-deadline-exceeded as given up on, as the controller would after its deadline", async () => {
  const name = fresh("p");
  await kubectl(["apply", "-f", "-"], deployment(name, 1, '"sim.ephemera.dev/progress-deadline-exceeded": "true"'));
  const d = JSON.parse(await kubectl(["get", "deployment", name, "-o", "json"])) as { status: Record<string, unknown> };
  expect(d.status).toMatchObject({
    availableReplicas: 0, conditions: expect.arrayContaining([expect.objectContaining({ type: "Progressing", status: "False", reason: "ProgressDeadlineExceeded" })]),
  });
});

it("reports an Argo Rollout Healthy", async () => {
  const name = fresh("r");
  await kubectl(["apply", "-f", "-"], deployment(name, 1).replace("apiVersion: apps/v1\nkind: Deployment", "apiVersion: argoproj.io/v1alpha1\nkind: Rollout"));
  // The controller answers a change before the server reads the next request.
  const ro = JSON.parse(await kubectl(["get", "rollout", name, "-o", "json"])) as { metadata: { generation: number }; status?: Record<string, unknown> };
  expect(ro.status).toMatchObject({ observedGeneration: ro.metadata.generation, phase: "Healthy", availableReplicas: 1 });
});
