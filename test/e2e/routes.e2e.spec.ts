// The Routes API end to end: the built stack, a sandbox with a fork applied with eph, and a
// client built from proto/routes/routes.proto (the wire format of Signadot's public
// routes.proto) asking it over gRPC, the same asked over HTTP, and a watcher that sees
// the sandbox's rule appear and go.
import * as pb from "@ephemera/proto";
import { call, grpc, waitFor } from "@ephemera/kit";
import { startTestStack, type TestStack } from "../support/stack.js";

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const PLUGIN = `
name: noop
spec:
  runner: {image: debian:bookworm-slim}
  create:
  - {name: up, script: "#!/bin/sh\\necho up"}
`;
const SANDBOX = (name: string) => `
name: ${name}
spec:
  cluster: local
  resources:
  - {name: res, plugin: noop}
  forks:
  - forkOf: {kind: Deployment, namespace: shop, name: orders}
    endpoints: [{name: http, port: 8080, protocol: http}]
`;

describe("the Routes API", () => {
  let stack: TestStack;
  let client: pb.routes.RoutesClient;
  let http: string;
  beforeAll(async () => {
    stack = await startTestStack("e2e-routes");
    const line = await waitFor(() => stack.output.map((l) => { try { return JSON.parse(l) as Json; } catch { return {}; } })
      .find((l) => String(l["msg"] ?? "").startsWith("Routes API listening")) ?? false, { timeoutMs: 15_000, what: "the Routes API's ports in the log" });
    client = new pb.routes.RoutesClient(`127.0.0.1:${line["port"]}`, grpc.credentials.createInsecure());
    http = `http://127.0.0.1:${line["httpPort"]}`;
  }, 60_000);
  afterAll(async () => {
    client?.close();
    await stack?.stop();
  });

  const ok = async (args: string[]) => {
    const r = await stack.eph(args);
    if (r.code !== 0) throw new Error(`eph ${args.join(" ")} exited ${r.code}: ${r.stderr}`);
    return r;
  };
  const get = (req: Partial<pb.routes.WorkloadRoutingRulesRequest>) =>
    call<pb.routes.WorkloadRoutingRulesRequest, pb.routes.GetWorkloadRoutingRulesResponse>(client.getWorkloadRoutingRules.bind(client), pb.routes.WorkloadRoutingRulesRequest.fromPartial(req));

  it("serves a ready sandbox's fork as a rule, over gRPC and HTTP alike, filtered, and a watcher sees it come and go", async () => {
    // The watcher first: it gets what there is, SYNCED, then the changes.
    const ops: pb.routes.WorkloadRoutingRuleOp[] = [];
    const watch = client.watchWorkloadRoutingRules(pb.routes.WorkloadRoutingRulesRequest.fromPartial({ baselineWorkload: { kind: "", namespace: "shop", name: "orders" } }));
    watch.on("data", (op: pb.routes.WorkloadRoutingRuleOp) => ops.push(op));
    watch.on("error", () => undefined); // cancelled at the end
    try {
      await waitFor(() => ops.some((o) => o.op === pb.routes.WatchOp.SYNCED), { timeoutMs: 10_000, what: "SYNCED" });
      expect(ops.filter((o) => o.op !== pb.routes.WatchOp.SYNCED)).toEqual([]);

      await ok(["plugin", "apply", "-f", stack.file("noop.yaml", PLUGIN)]);
      await ok(["sandbox", "apply", "-f", stack.file("sb-routed.yaml", SANDBOX("routed")), "--wait"]);
      const readyAt = Date.now();
      const view = JSON.parse((await ok(["sandbox", "get", "routed", "-o", "json"])).stdout) as Json;
      const key = view["routingKey"] as string;
      const expected = {
        routingKey: key,
        baseline: { kind: "Deployment", namespace: "shop", name: "orders" },
        destinationSandbox: { name: "routed" },
        mappings: [{ workloadPort: 8080, destinations: [{ host: `orders-${key}.shop.svc`, port: 8080 }], trafficManager: undefined }],
      };
      await waitFor(() => ops.some((o) => o.op === pb.routes.WatchOp.ADD), { timeoutMs: 1000, what: "the watcher to see the rule within 1 s" });
      expect(Date.now() - readyAt).toBeLessThan(1000);
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
      expect(services.services).toContainEqual(expect.objectContaining({ hostname: `orders-${key}.shop.svc`, sandboxInfo: { sandboxRoutingKey: key, baselineHostname: "orders.shop.svc" } }));

      await ok(["sandbox", "delete", "routed", "--wait"]);
      await waitFor(() => ops.some((o) => o.op === pb.routes.WatchOp.REMOVE), { timeoutMs: 5000, what: "the watcher to see the rule removed" });
      expect(ops.find((o) => o.op === pb.routes.WatchOp.REMOVE)!.route?.routingKey).toBe(key);
      expect((await get({})).routingRules).toEqual([]);
    } finally {
      watch.cancel();
    }
  });
});
