// EPHEMERA_ROUTING_MESH=istio end to end on the simulated cluster (which serves Istio's
// VirtualService as if its CRDs were installed; it stores them and routes nothing by them):
// a baseline Deployment and Service applied with kubectl; a sandbox forking the Deployment
// gets a route matching its routing key in `kubectl get virtualservice`; a second sandbox
// adds its own; deleting them takes their routes away, and the VirtualService with the last.
import { kubectl, startSim, type Sim } from "../support/kube.js";
import { startTestStack, type TestStack } from "../support/stack.js";

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const BASELINE = `
apiVersion: v1
kind: Namespace
metadata: {name: mesh}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: backend, namespace: mesh, labels: {app: backend}}
spec:
  replicas: 1
  selector: {matchLabels: {app: backend}}
  template:
    metadata: {labels: {app: backend}}
    spec:
      containers:
      - {name: backend, image: "backend:v1", ports: [{containerPort: 8080}], env: [{name: VERSION, value: baseline}]}
---
apiVersion: v1
kind: Service
metadata: {name: backend, namespace: mesh}
spec:
  selector: {app: backend}
  ports: [{name: http, port: 8080, targetPort: 8080}]
`;

describe("Istio routes for forks (EPHEMERA_ROUTING_MESH=istio, simulated cluster)", () => {
  let sim: Sim;
  let stack: TestStack;
  beforeAll(async () => {
    sim = await startSim();
    stack = await startTestStack("e2e-istio", {
      EPHEMERA_RUNNER_DRIVER: "kubernetes", KUBECONFIG: sim.kubeconfig, EPHEMERA_KUBE_NAMESPACE: "default", EPHEMERA_ROUTING_MESH: "istio",
    });
    await kubectl(sim, ["apply", "-f", "-"], { stdin: BASELINE });
  }, 90_000);
  afterAll(async () => {
    await stack?.stop();
    await sim?.stop();
  });

  async function ok(args: string[]) {
    const r = await stack.eph(args);
    if (r.code !== 0) throw new Error(`eph ${args.join(" ")} exited ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
    return r;
  }
  const sandbox = async (name: string) => {
    await ok(["sandbox", "apply", "-f", stack.file(`${name}.yaml`, `
name: ${name}
spec:
  cluster: local
  forks:
  - forkOf: {kind: Deployment, namespace: mesh, name: backend}
    customizations:
      env: [{name: VERSION, value: ${name}}]
`)]);
    return JSON.parse((await ok(["sandbox", "get", name, "-o", "json"])).stdout)["routingKey"] as string;
  };
  const virtualServices = async () => JSON.parse((await kubectl(sim, ["get", "virtualservice", "-n", "mesh", "-o", "json"])).stdout)["items"] as Json[];
  /** Each route's name, the routing key its ot-baggage match holds, and where it goes. */
  const routes = (vs: Json) => (vs["spec"].http as Json[]).map((r) => [r["name"], r["match"]?.[1].headers["ot-baggage-sd-routing-key"].exact ?? "", r["route"][0].destination.host]);

  it("routes each sandbox's key to its fork Service, and removes the VirtualService with the last fork", async () => {
    const first = await sandbox("blue");
    const [vs, ...others] = await virtualServices();
    expect(others).toEqual([]);
    expect(vs!["metadata"]).toMatchObject({ name: "ephemera-backend", namespace: "mesh", labels: { "ephemera.dev/mesh": "istio", "ephemera.dev/baseline-service": "backend" } });
    expect(vs!["spec"].hosts).toEqual(["backend", "backend.mesh.svc.cluster.local"]);
    expect(routes(vs!)).toEqual([
      [`sandbox-${first}`, first, `backend-${first}.mesh.svc.cluster.local`],
      ["baseline", "", "backend.mesh.svc.cluster.local"],
    ]);
    expect(vs!["spec"].http[0].match[0].headers.baggage.regex).toContain(`sd-routing-key[ \\t]*=[ \\t]*${first}`);

    const second = await sandbox("green");
    const both = (await virtualServices()).map(routes);
    const byKey = [[`sandbox-${first}`, first, `backend-${first}.mesh.svc.cluster.local`], [`sandbox-${second}`, second, `backend-${second}.mesh.svc.cluster.local`]]
      .sort(([a], [b]) => a!.localeCompare(b!));
    expect(both).toEqual([[...byKey, ["baseline", "", "backend.mesh.svc.cluster.local"]]]);

    await ok(["sandbox", "delete", "blue"]);
    expect((await virtualServices()).map(routes)).toEqual([[
      [`sandbox-${second}`, second, `backend-${second}.mesh.svc.cluster.local`], ["baseline", "", "backend.mesh.svc.cluster.local"],
    ]]);
    await ok(["sandbox", "delete", "green"]);
    expect(await virtualServices()).toEqual([]);
  }, 120_000);
});
