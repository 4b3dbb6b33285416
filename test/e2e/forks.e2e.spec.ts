// Forks and the Routes API end to end on the simulated cluster: baselines applied with
// kubectl; a sandbox with a resource and a fork whose env reads the resource's output;
// the fork, its Service and the outputs Secret as kubectl sees them; the Routes API (a
// client built from proto/routes/routes.proto, and the HTTP form) and a watcher seeing
// the rule come and go; delete removing the forks before the resource's delete workflow
// runs; a fork's env with a variable deleted and another fork's Service by an expression;
// updates (an image changed in place, a fork added and one removed); a baseline that does
// not exist.
import { chmodSync, existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as pb from "@ephemera/proto";
import { call, grpc, waitFor } from "@ephemera/kit";
import { kubectl, startSim, type Sim } from "../support/kube.js";
import { startTestStack, type TestStack } from "../support/stack.js";

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const DSN = "postgres://app:hunter2-0f9e@db.shop:5432/app";

const baseline = (name: string, port: number) => `
apiVersion: apps/v1
kind: Deployment
metadata: {name: ${name}, namespace: shop, labels: {app: ${name}}}
spec:
  replicas: 2
  selector: {matchLabels: {app: ${name}}}
  template:
    metadata: {labels: {app: ${name}, tier: web}}
    spec:
      containers:
      - name: ${name}
        image: ${name}:v1
        ports: [{containerPort: ${port}}]
        env: [{name: MODE, value: baseline}]
---
apiVersion: v1
kind: Service
metadata: {name: ${name}, namespace: shop}
spec:
  selector: {app: ${name}}
  ports: [{name: http, port: ${port}, targetPort: ${port}}]
`;

describe("forks and the Routes API (Kubernetes driver, simulated cluster)", () => {
  let sim: Sim;
  let stack: TestStack;
  let client: pb.routes.RoutesClient;
  let http: string;
  const gate = join("/var/tmp", `ephemera-forks-gate-${process.pid}`);
  beforeAll(async () => {
    // The gate is a host directory shared with the test, written by steps running as nobody:
    // the host stays writable to pods here (kubelet.int.spec.ts proves the read-only host).
    sim = await startSim({ EPHEMERA_STEP_HOST_READONLY: "false" });
    stack = await startTestStack("e2e-forks", { EPHEMERA_RUNNER_DRIVER: "kubernetes", KUBECONFIG: sim.kubeconfig, EPHEMERA_KUBE_NAMESPACE: "default" });
    const line = await waitFor(() => stack.output.map((l) => { try { return JSON.parse(l) as Json; } catch { return {}; } })
      .find((l) => String(l["msg"] ?? "").startsWith("Routes API listening")) ?? false, { timeoutMs: 15_000, what: "the Routes API's ports in the log" });
    client = new pb.routes.RoutesClient(`127.0.0.1:${line["port"]}`, grpc.credentials.createInsecure());
    http = `http://127.0.0.1:${line["httpPort"]}`;
    await kubectl(sim, ["apply", "-f", "-"], { stdin: "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n" });
    await kubectl(sim, ["apply", "-f", "-"], { stdin: baseline("orders", 8080) + "---" + baseline("cart", 9090) });
    mkdirSync(gate, { recursive: true });
    chmodSync(gate, 0o777);
    await ok(["plugin", "apply", "-f", stack.file("kv.yaml", `
name: kv
spec:
  runner: {image: "debian:bookworm-slim"}
  create:
  - name: provision
    outputs: [{name: dsn, valueFromPath: /tmp/dsn}]
    script: |
      #!/bin/sh
      # The password is made here, so that the value is written nowhere but in the output.
      printf 'postgres://app:%s@db.shop:5432/app' "$(echo aHVudGVyMi0wZjll | base64 -d)" > /tmp/dsn
  delete:
  - name: drop
    script: |
      #!/bin/sh
      # Held until the test has looked at the cluster while the delete workflow runs.
      touch ${gate}/drop-started-$SIGNADOT_SANDBOX_NAME
      while [ ! -e ${gate}/open-$SIGNADOT_SANDBOX_NAME ]; do sleep 0.05; done
`)]);
  }, 90_000);
  afterAll(async () => {
    client?.close();
    await stack?.stop();
    await sim?.stop();
    rmSync(gate, { recursive: true, force: true });
  });

  async function ok(args: string[]) {
    const r = await stack.eph(args);
    if (r.code !== 0) throw new Error(`eph ${args.join(" ")} exited ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
    return r;
  }
  const sandboxFile = (name: string, forks: string) => stack.file(`${name}.yaml`, `
name: ${name}
spec:
  cluster: local
  resources:
  - {name: db, plugin: kv}
  forks:
${forks}
  defaultRouteGroup:
    endpoints:
    - {name: web, target: "http://orders.shop.svc:8080"}
`);
  const ordersFork = (image: string) => `
  - forkOf: {kind: Deployment, namespace: shop, name: orders}
    customizations:
      images: [{image: "${image}"}]
      env:
      - name: DB_URL
        valueFrom: {resource: {name: db, outputKey: provision.dsn}}
`;
  const cartFork = `
  - forkOf: {kind: Deployment, namespace: shop, name: cart}
    customizations:
      env: [{name: MODE, value: sandbox}]
`;
  const view = async (name: string) => JSON.parse((await ok(["sandbox", "get", name, "-o", "json"])).stdout) as Json;
  const inShop = async () => JSON.parse((await kubectl(sim, ["get", "deploy,svc,secret", "-n", "shop", "-o", "json"])).stdout)["items"] as Json[];
  const find = (items: Json[], kind: string, name: string) => items.find((o) => o["kind"] === kind && o["metadata"].name === name);
  const get = (req: Partial<pb.routes.WorkloadRoutingRulesRequest>) =>
    call<pb.routes.WorkloadRoutingRulesRequest, pb.routes.GetWorkloadRoutingRulesResponse>(client.getWorkloadRoutingRules.bind(client), pb.routes.WorkloadRoutingRulesRequest.fromPartial(req));
  const openDrop = (name: string) => writeFileSync(join(gate, `open-${name}`), "");

  it("creates the fork, its Service and the outputs Secret once the resource is ready; routes to it; removes them before the resource's delete workflow", async () => {
    // The watcher first: it gets what there is, SYNCED, then the changes.
    const ops: pb.routes.WorkloadRoutingRuleOp[] = [];
    const watch = client.watchWorkloadRoutingRules(pb.routes.WorkloadRoutingRulesRequest.fromPartial({ baselineWorkload: { kind: "", namespace: "shop", name: "orders" } }));
    watch.on("data", (op: pb.routes.WorkloadRoutingRuleOp) => ops.push(op));
    watch.on("error", () => undefined); // cancelled at the end
    try {
      await waitFor(() => ops.some((o) => o.op === pb.routes.WatchOp.SYNCED), { timeoutMs: 10_000, what: "SYNCED" });
      expect(ops.filter((o) => o.op !== pb.routes.WatchOp.SYNCED)).toEqual([]);

      await ok(["sandbox", "apply", "-f", sandboxFile("routed", ordersFork("orders:v2"))]);
      const sb = await view("routed");
      const key = sb["routingKey"] as string;
      const fork = `orders-${key}`;
      expect(sb["status"]).toMatchObject({ ready: true, reason: "Ready" });
      expect(sb["workloads"]).toEqual([{
        kind: "fork", name: "deployment/orders", status: "Available", message: "fork of Deployment shop/orders",
        workload: `Deployment shop/${fork}`, hosts: [`${fork}.shop.svc`],
      }]);
      expect(sb["endpoints"]).toEqual([{
        name: "web", target: "http://orders.shop.svc:8080", url: `https://web--${key}.preview.ephemera.localhost`, baselineUrl: "https://orders-shop-8080.preview.ephemera.localhost",
      }]);

      // What kubectl sees: the fork, its Service, and the output in a Secret its env reads.
      const items = await inShop();
      const deploy = find(items, "Deployment", fork)!;
      expect(deploy).toBeDefined();
      expect(deploy["metadata"].labels).toMatchObject({ "ephemera.dev/sandbox": "routed", "ephemera.dev/routing-key": key, "ephemera.dev/fork": fork });
      expect(deploy["spec"].replicas).toBe(1);
      const podLabels = deploy["spec"].template.metadata.labels;
      expect(podLabels["app"]).not.toBe("orders"); // the baseline's Service does not select the fork's pods
      expect(deploy["spec"].selector.matchLabels).toEqual(Object.fromEntries(Object.keys(deploy["spec"].selector.matchLabels).map((k) => [k, podLabels[k]])));
      const container = deploy["spec"].template.spec.containers[0];
      expect(container.image).toBe("orders:v2");
      const env = Object.fromEntries(container.env.map((e: Json) => [e.name, e.value ?? e.valueFrom]));
      expect(env).toMatchObject({
        MODE: "baseline", SIGNADOT_SANDBOX_NAME: "routed", SIGNADOT_SANDBOX_ROUTING_KEY: key, EPHEMERA_ROUTING_KEY: key,
        DB_URL: { secretKeyRef: { name: `ephemera-${key}-outputs`, key: "db.provision.dsn" } },
      });
      expect(JSON.stringify(deploy)).not.toContain("hunter2"); // never inlined
      const service = find(items, "Service", fork)!;
      expect(service["spec"].ports).toEqual([expect.objectContaining({ name: "http", port: 8080, targetPort: 8080 })]);
      expect(service["spec"].selector).toEqual(deploy["spec"].selector.matchLabels);
      const secret = find(items, "Secret", `ephemera-${key}-outputs`)!;
      expect(Buffer.from(secret["data"]["db.provision.dsn"], "base64").toString()).toBe(DSN);
      // The baseline is untouched.
      expect(find(items, "Deployment", "orders")!["spec"].template.spec.containers[0].image).toBe("orders:v1");

      // The Routes API: the rule for the routing key, to the fork's Service, pushed to the watcher (how soon is
      // the bench's to measure, not a test's: a deadline here failed on a loaded machine).
      const expected = {
        routingKey: key,
        baseline: { kind: "Deployment", namespace: "shop", name: "orders" },
        destinationSandbox: { name: "routed" },
        mappings: [{ workloadPort: 8080, destinations: [{ host: `${fork}.shop.svc`, port: 8080 }], trafficManager: undefined }],
      };
      await waitFor(() => ops.some((o) => o.op === pb.routes.WatchOp.ADD), { timeoutMs: 15_000, what: "the watcher to see the rule" });
      expect(ops.find((o) => o.op === pb.routes.WatchOp.ADD)!.route).toEqual(expected);
      const all = await get({});
      expect(all.routingRules).toEqual([expected]);
      expect((await get({ routingKey: key })).routingRules).toHaveLength(1);
      expect((await get({ routingKey: "nope" })).routingRules).toEqual([]);
      expect((await get({ destinationSandbox: { name: "routed" } })).routingRules).toHaveLength(1);
      expect((await get({ baselineWorkload: { kind: "Deployment", namespace: "shop", name: "cart" } })).routingRules).toEqual([]);
      // The HTTP form says the same as gRPC, in proto3's JSON.
      const res = await globalThis.fetch(`${http}/api/v1/workloads/routing-rules?baselineNamespace=shop&baselineName=orders&routingKey=${key}`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual(pb.routes.GetWorkloadRoutingRulesResponse.toJSON(all));
      const none = await (await globalThis.fetch(`${http}/api/v1/workloads/routing-rules?destinationSandboxName=other`)).json();
      expect(none).toEqual(pb.routes.GetWorkloadRoutingRulesResponse.toJSON({ routingRules: [] })); // proto3 JSON: an empty list is left out
      const services = await call<pb.routes.GetClusterServicesRequest, pb.routes.GetClusterServicesResponse>(client.getClusterServices.bind(client), {});
      expect(services.services).toContainEqual(expect.objectContaining({ hostname: `${fork}.shop.svc`, sandboxInfo: { sandboxRoutingKey: key, baselineHostname: "orders.shop.svc" } }));
      // The baseline Service in front of the forked workload, as the runner recorded it.
      expect(services.services).toContainEqual({ serviceIp: "", hostname: "orders.shop.svc", ports: [{ name: "port-8080", port: 8080, protocol: "TCP", appProtocol: "" }] });

      // Delete: the rule goes, and the fork, Service and Secret are gone while the delete workflow's step runs.
      const deleting = stack.eph(["sandbox", "delete", "routed"]);
      await waitFor(() => ops.some((o) => o.op === pb.routes.WatchOp.REMOVE), { timeoutMs: 5000, what: "the watcher to see the rule removed" });
      expect(ops.find((o) => o.op === pb.routes.WatchOp.REMOVE)!.route?.routingKey).toBe(key);
      await waitFor(() => existsSync(join(gate, "drop-started-routed")), { timeoutMs: 30_000, what: "the resource's delete step to start" });
      const during = await inShop();
      expect([find(during, "Deployment", fork), find(during, "Service", fork), find(during, "Secret", `ephemera-${key}-outputs`)]).toEqual([undefined, undefined, undefined]);
      expect(find(during, "Deployment", "orders")).toBeDefined();
      openDrop("routed");
      expect((await deleting).code).toBe(0);
      expect((await get({})).routingRules).toEqual([]);
      // In the record too: the forks' removal was reported before the resource's delete was asked for.
      const events = await stack.events();
      const mine = events.filter((e) => e.aggregate === "sandbox" && e.subject === "routed");
      const removed = mine.findIndex((e) => e.type === "ephemera.sandbox.forks_available.v1" && (e.data as Json)["generation"] === 2);
      const deprovision = mine.findIndex((e) => e.type === "ephemera.sandbox.resource_deprovision_requested.v1");
      expect(removed).toBeGreaterThan(-1);
      expect(removed).toBeLessThan(deprovision);
      // The output's value is in the Secret only: in no event, no log line, no API answer.
      expect(JSON.stringify(events)).not.toContain("hunter2");
      expect(stack.output.join("\n")).not.toContain("hunter2");
      expect(JSON.stringify([sb, all, services])).not.toContain("hunter2");
    } finally {
      watch.cancel();
    }
  }, 120_000);

  it("writes a fork's env as the spec says: a variable deleted is gone, another fork's Service read by an expression", async () => {
    openDrop("custom");
    const cartOf = (expression: string) => `{fork: {forkOf: {kind: Deployment, namespace: shop, name: cart}, expression: "${expression}"}}`;
    await ok(["sandbox", "apply", "-f", sandboxFile("custom", `
  - forkOf: {kind: Deployment, namespace: shop, name: orders}
    customizations:
      env:
      - {name: MODE, operation: delete}
      - {name: CART_ADDR, valueFrom: ${cartOf("{{ .Service.Host }}:{{ .Service.Port }}")}}
      - {name: CART_URL, valueFrom: ${cartOf("http://{{.Service.Host}}:{{ .Service.Port }}/api")}}
  - forkOf: {kind: Deployment, namespace: shop, name: cart}
`), "--wait"]);
    const key = (await view("custom"))["routingKey"] as string;
    const items = await inShop();
    const env = find(items, "Deployment", `orders-${key}`)!["spec"].template.spec.containers[0].env as Json[];
    expect(env.map((e) => e["name"])).not.toContain("MODE");
    expect(env).toContainEqual({ name: "CART_ADDR", value: `cart-${key}.shop.svc:9090` });
    expect(env).toContainEqual({ name: "CART_URL", value: `http://cart-${key}.shop.svc:9090/api` });
    // The Service the value names exists; and the delete was orders' only.
    expect(find(items, "Service", `cart-${key}`)!["spec"].ports).toEqual([expect.objectContaining({ port: 9090 })]);
    const cartEnv = find(items, "Deployment", `cart-${key}`)!["spec"].template.spec.containers[0].env;
    expect(cartEnv).toContainEqual({ name: "MODE", value: "baseline" });
    await ok(["sandbox", "delete", "custom", "--wait"]);
  }, 120_000);

  const uidOf = (items: Json[], kind: string, name: string) => find(items, kind, name)?.["metadata"].uid as string | undefined;

  it("updates: a fork's image changed in place; a fork added and one removed, with what the removed one had", async () => {
    openDrop("upd"); // its delete step need not be held
    await ok(["sandbox", "apply", "-f", sandboxFile("upd", ordersFork("orders:v2"))]);
    const key = (await view("upd"))["routingKey"] as string;
    const before = await inShop();
    const orders = find(before, "Deployment", `orders-${key}`)!;

    // Routing goes on through the update: a watcher of this sandbox's rules sees no REMOVE while the new image rolls out.
    const ops: pb.routes.WorkloadRoutingRuleOp[] = [];
    const watch = client.watchWorkloadRoutingRules(pb.routes.WorkloadRoutingRulesRequest.fromPartial({ destinationSandbox: { name: "upd" } }));
    watch.on("data", (op: pb.routes.WorkloadRoutingRuleOp) => ops.push(op));
    watch.on("error", () => undefined);
    await waitFor(() => ops.some((o) => o.op === pb.routes.WatchOp.SYNCED), { timeoutMs: 10_000, what: "SYNCED" });
    const opNames = () => ops.map((o) => `${pb.routes.WatchOp[o.op]}${o.route ? ` ${o.route.baseline?.name}` : ""}`);

    // The image changes: the same Deployment (same uid), a new generation, ready again once it is available.
    const changed = await ok(["sandbox", "apply", "-f", sandboxFile("upd", ordersFork("orders:v3"))]);
    expect(opNames()).toEqual(["ADD orders", "SYNCED"]);
    expect(changed.stdout).toContain("sandbox upd ready");
    const after = await inShop();
    const updated = find(after, "Deployment", `orders-${key}`)!;
    expect(updated["metadata"].uid).toBe(orders["metadata"].uid);
    expect(updated["metadata"].generation).toBe(orders["metadata"].generation + 1);
    expect(updated["spec"].template.spec.containers[0].image).toBe("orders:v3");
    expect(uidOf(after, "Service", `orders-${key}`)).toBe(uidOf(before, "Service", `orders-${key}`));
    expect((await view("upd"))["workloads"][0]).toMatchObject({ status: "Available" });

    // orders' fork replaced by cart's: cart's fork and Service appear; orders', and the outputs Secret only it read, go.
    await ok(["sandbox", "apply", "-f", sandboxFile("upd", cartFork)]);
    const swapped = await inShop();
    expect(find(swapped, "Deployment", `cart-${key}`)!["spec"].template.spec.containers[0].env).toContainEqual({ name: "MODE", value: "sandbox" });
    expect(find(swapped, "Service", `cart-${key}`)!["spec"].ports).toEqual([expect.objectContaining({ port: 9090 })]);
    expect([find(swapped, "Deployment", `orders-${key}`), find(swapped, "Service", `orders-${key}`), find(swapped, "Secret", `ephemera-${key}-outputs`)])
      .toEqual([undefined, undefined, undefined]);
    expect((await get({ routingKey: key })).routingRules.map((r) => r.baseline?.name)).toEqual(["cart"]);
    await waitFor(() => opNames().length === 4, { timeoutMs: 5000, what: "the watcher to see orders' rule go and cart's come" });
    expect(opNames().slice(2).sort()).toEqual(["ADD cart", "REMOVE orders"]);
    watch.cancel();
    expect((await view("upd"))["workloads"]).toEqual([expect.objectContaining({ name: "deployment/cart", status: "Available", hosts: [`cart-${key}.shop.svc`] })]);

    await ok(["sandbox", "delete", "upd"]);
    expect(find(await inShop(), "Deployment", `cart-${key}`)).toBeUndefined();
  }, 120_000);

  it("fails a sandbox whose baseline does not exist with BaselineNotFound naming it; once it exists, retry brings the fork up", async () => {
    openDrop("lost");
    const forkOfMissing = `
  - forkOf: {kind: Deployment, namespace: shop, name: missing}
`;
    const r = await stack.eph(["sandbox", "apply", "-f", sandboxFile("lost", forkOfMissing)]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("baseline Deployment shop/missing not found on cluster local");
    const failed = await view("lost");
    expect(failed["status"]).toMatchObject({ ready: false, reason: "BaselineNotFound" });
    expect(failed["workloads"]).toEqual([expect.objectContaining({ status: "Failed", message: expect.stringContaining("BaselineNotFound") })]);
    const key = failed["routingKey"] as string;
    expect(find(await inShop(), "Deployment", `missing-${key}`)).toBeUndefined();

    await kubectl(sim, ["apply", "-f", "-"], { stdin: baseline("missing", 7070) });
    const retried = await ok(["sandbox", "retry", "lost"]);
    expect(retried.stdout).toContain("retrying the forks");
    expect((await view("lost"))["status"]).toMatchObject({ ready: true });
    expect(find(await inShop(), "Deployment", `missing-${key}`)).toBeDefined();
    await ok(["sandbox", "delete", "lost"]);
    expect(find(await inShop(), "Deployment", `missing-${key}`)).toBeUndefined();
  }, 120_000);

  it("shows a fork not yet available as Progressing, the sandbox waiting for it; ready once an update's patch makes it available", async () => {
    openDrop("slow");
    // A strategic patch marks the fork for the simulator's workload controller as never available.
    const held = (unavailable: boolean) => `
  - forkOf: {kind: Deployment, namespace: shop, name: cart}
    customizations:
      patch:
        type: strategic
        value: |
          metadata: {annotations: {sim.ephemera.dev/unavailable: "${unavailable}"}}
          spec: {template: {spec: {containers: [{name: cart, env: [{name: PATCHED, value: "yes"}]}]}}}
`;
    await ok(["sandbox", "apply", "-f", sandboxFile("slow", held(true)), "--wait=false"]);
    const waiting = await waitFor(async () => {
      const v = await view("slow");
      return v["workloads"]?.[0]?.status === "Progressing" ? v : false;
    }, { timeoutMs: 30_000, intervalMs: 200, what: "the fork Progressing" });
    expect(waiting["status"]).toMatchObject({ ready: false, reason: "Creating", message: "waiting for the forks to be available on cluster local" });
    const key = waiting["routingKey"] as string;
    const deploy = find(await inShop(), "Deployment", `cart-${key}`)!;
    expect(deploy["spec"].template.spec.containers[0].env).toContainEqual({ name: "PATCHED", value: "yes" });
    expect((await get({ routingKey: key })).routingRules).toEqual([]); // not ready: no rule yet

    await ok(["sandbox", "apply", "-f", sandboxFile("slow", held(false))]);
    expect((await view("slow"))["workloads"][0]).toMatchObject({ status: "Available" });
    expect((await get({ routingKey: key })).routingRules).toHaveLength(1);
    await ok(["sandbox", "delete", "slow"]);
  }, 120_000);

  it("a forced delete deletes the sandbox at once, and the runner still removes its forks", async () => {
    await ok(["sandbox", "apply", "-f", sandboxFile("forced", cartFork)]);
    const key = (await view("forced"))["routingKey"] as string;
    expect(find(await inShop(), "Deployment", `cart-${key}`)).toBeDefined();
    await ok(["sandbox", "delete", "forced", "--force"]);
    await waitFor(async () => {
      const items = await inShop();
      return !find(items, "Deployment", `cart-${key}`) && !find(items, "Service", `cart-${key}`);
    }, { timeoutMs: 15_000, intervalMs: 200, what: "the force-deleted sandbox's fork and Service removed" });
  }, 120_000);

  it("fails a sandbox whose fork's patch does not apply with PatchFailed, naming the fork, and writes no fork", async () => {
    const r = await stack.eph(["sandbox", "apply", "-f", sandboxFile("badpatch", `
  - forkOf: {kind: Deployment, namespace: shop, name: orders}
    customizations:
      patch: {type: json, value: '[{"op": "replace", "path": "/spec/nothing/here", "value": 1}]'}
`)]);
    expect(r.code).toBe(1);
    const v = await view("badpatch");
    expect(v["status"]).toMatchObject({ ready: false, reason: "PatchFailed", message: expect.stringContaining("fork of Deployment shop/orders: the JSON patch does not apply") });
    expect(find(await inShop(), "Deployment", `orders-${v["routingKey"]}`)).toBeUndefined();
    openDrop("badpatch");
    await ok(["sandbox", "delete", "badpatch"]);
  }, 120_000);

  const labelled = async (key: string) => (await inShop()).filter((o) => o["metadata"].labels?.["ephemera.dev/routing-key"] === key).map((o) => `${o["kind"]}/${o["metadata"].name}`);

  it("names a refusal of the cluster Rejected; what it had written before the refusal is removed with the sandbox", async () => {
    openDrop("denied");
    // The fork's Service is refused (403), after its Deployment was written.
    await sim.faults({ apiErrors: { next: 1, codes: [403], verbs: ["create"], resources: ["services"] } });
    let r: Awaited<ReturnType<typeof stack.eph>>;
    try {
      r = await stack.eph(["sandbox", "apply", "-f", sandboxFile("denied", ordersFork("orders:v2"))]);
    } finally {
      await sim.faults(null);
    }
    expect(r.code).toBe(1);
    const v = await view("denied");
    expect(v["status"]).toMatchObject({ ready: false, reason: "Rejected", message: expect.stringContaining("the cluster refused: 403") });
    const key = v["routingKey"] as string;
    expect(await labelled(key)).toEqual(expect.arrayContaining([`Deployment/orders-${key}`]));
    await ok(["sandbox", "delete", "denied"]);
    expect(await labelled(key)).toEqual([]);
  }, 120_000);

  it("fails a fork whose rollout passed its progress deadline with ForkUnavailable; re-applied without the cause, it comes up", async () => {
    openDrop("stuck");
    const stuck = (on: boolean) => `
  - forkOf: {kind: Deployment, namespace: shop, name: cart}
    customizations:
      patch: {type: merge, value: '{"metadata": {"annotations": {"sim.ephemera.dev/progress-deadline-exceeded": "${on}"}}}'}
`;
    const r = await stack.eph(["sandbox", "apply", "-f", sandboxFile("stuck", stuck(true))]);
    expect(r.code).toBe(1);
    const v = await view("stuck");
    expect(v["status"]).toMatchObject({ ready: false, reason: "ForkUnavailable", message: expect.stringContaining("has timed out progressing") });
    expect(v["workloads"][0]).toMatchObject({ status: "Failed" });
    await ok(["sandbox", "apply", "-f", sandboxFile("stuck", stuck(false))]);
    expect((await view("stuck"))["workloads"][0]).toMatchObject({ status: "Available" });
    await ok(["sandbox", "delete", "stuck"]);
    expect(await labelled(v["routingKey"])).toEqual([]);
  }, 120_000);
});
