import * as pb from "@ephemera/proto";
import { localServiceName } from "@ephemera/kit";
import type { SandboxRecord } from "../sandbox/state.js";
import type { RouteGroupRecord } from "../routegroup/state.js";
import { routeGroupRouting, routeGroupStatus } from "../routegroup/members.js";
import { clusterServices, diff, routingRules, type PlacedSandbox } from "./rules.js";

const record = (name: string, routingKey: string, spec: Partial<pb.SandboxSpec>, over: Partial<SandboxRecord> = {}): SandboxRecord => ({
  status: "active", name, routingKey, cluster: "c1", endpoints: [], resources: [], ready: true, forced: false,
  createdAt: "", updatedAt: "", specUpdatedAt: "", deleteReason: "",
  forks: { generation: 1, requested: 1, requestedCount: spec.forks?.length ?? 0, available: 1, skipped: false },
  spec: pb.SandboxSpec.fromPartial({ cluster: "c1", ...spec }),
  ...over,
});

const backendLocal = pb.Local.fromPartial({
  name: "backend", from: { kind: "Deployment", namespace: "shop", name: "backend" },
  mappings: [{ port: 8080, toLocal: "localhost:8080" }, { port: 9090, toLocal: "localhost:9090" }],
});

/** Where the runner put the local: its Service for the baseline Service `backend` (port 80 → targetPort 8080); 9090 unmapped by any Service. */
const placement = (routingKey: string): pb.LocalPlacement => {
  const host = `${localServiceName("backend", routingKey)}.shop.svc`;
  return pb.LocalPlacement.fromPartial({
    local: "backend", baseline: { kind: "Deployment", namespace: "shop", name: "backend" }, sessionId: "s1",
    services: [{ host, ports: [80], baselineHost: "backend.shop.svc" }],
    routes: [{ workloadPort: 8080, host, port: 80 }],
  });
};

const withLocal = (name: string, routingKey: string, connected: boolean, placed = true, over: Partial<SandboxRecord> = {}, labels: Record<string, string> = {}): PlacedSandbox => ({
  sandbox: record(name, routingKey, { local: [backendLocal], labels }, over),
  placements: [],
  connected: new Set(connected ? ["backend"] : []),
  localPlacements: placed ? [placement(routingKey)] : [],
});

describe("routing rules of local workloads", () => {
  it("sends the sandbox's key for the baseline to the local's Service: each mapped port to the Service port reaching it, unreached ones left out", () => {
    expect(routingRules([withLocal("a", "rk1", true)])).toEqual([{
      routingKey: "rk1",
      baseline: { kind: "Deployment", namespace: "shop", name: "backend" },
      destinationSandbox: { name: "a" },
      mappings: [{ workloadPort: 8080, destinations: [{ host: "backend-rk1-local.shop.svc", port: 80 }] }],
    }]);
  });

  it("has no rule while disconnected, before the runner placed its Services, or once the sandbox is being deleted", () => {
    expect(routingRules([withLocal("a", "rk1", false)])).toEqual([]);
    expect(routingRules([withLocal("b", "rk2", true, false)])).toEqual([]);
    expect(routingRules([withLocal("c", "rk3", true, true, { status: "deleting" })])).toEqual([]);
  });

  it("a disconnect removes the rule and a reconnect adds it back", () => {
    const connected = routingRules([withLocal("a", "rk1", true)]);
    const gone = routingRules([withLocal("a", "rk1", false)]);
    expect(diff(connected, gone)).toEqual([{ op: pb.routes.WatchOp.REMOVE, route: connected[0] }]);
    expect(diff(gone, connected)).toEqual([{ op: pb.routes.WatchOp.ADD, route: connected[0] }]);
  });

  it("swapping a fork for a local: the fork's rule is removed with the update, the local's added once it is connected and placed", () => {
    const forkSpec = { forks: [pb.Fork.fromPartial({ forkOf: { kind: "Deployment", namespace: "shop", name: "backend" }, endpoints: [{ name: "http", port: 8080 }] })] };
    const forked: PlacedSandbox = {
      sandbox: record("a", "rk1", forkSpec),
      placements: [{
        fork: "Deployment shop/backend", baseline: { kind: "Deployment", namespace: "shop", name: "backend" },
        workload: { kind: "Deployment", namespace: "shop", name: "backend-rk1" },
        services: [{ host: "backend-rk1.shop.svc", ports: [8080], baselineHost: "backend.shop.svc" }],
      }],
    };
    const before = routingRules([forked]);
    const updated = routingRules([withLocal("a", "rk1", false)]);
    const served = routingRules([withLocal("a", "rk1", true)]);
    expect(diff(before, updated).map((o) => [o.op, o.route?.mappings[0]?.destinations[0]?.host])).toEqual([[pb.routes.WatchOp.REMOVE, "backend-rk1.shop.svc"]]);
    expect(diff(updated, served).map((o) => [o.op, o.route?.mappings[0]?.destinations[0]?.host])).toEqual([[pb.routes.WatchOp.ADD, "backend-rk1-local.shop.svc"]]);
  });

  it("lists a connected local's Services in GetClusterServices, with the baseline Service they stand for", () => {
    expect(clusterServices([withLocal("a", "rk1", true)])).toEqual([
      { serviceIp: "", hostname: "backend.shop.svc", ports: [{ name: "port-80", port: 80, protocol: "TCP", appProtocol: "" }] },
      {
        serviceIp: "", hostname: "backend-rk1-local.shop.svc", ports: [{ name: "port-80", port: 80, protocol: "TCP", appProtocol: "" }],
        sandboxInfo: { sandboxRoutingKey: "rk1", baselineHostname: "backend.shop.svc" },
      },
    ]);
    expect(clusterServices([withLocal("a", "rk1", false)])).toEqual([]);
  });
});

describe("route groups with local workloads", () => {
  const group: RouteGroupRecord = {
    status: "active", name: "g", routingKey: "rkg", cluster: "c1", endpoints: [], createdAt: "", updatedAt: "",
    spec: pb.RouteGroupSpec.fromPartial({ cluster: "c1", match: { label: { key: "feature", value: "x" } } }),
  };

  it("routes a member's connected local under the group's key too", () => {
    const rules = routingRules([withLocal("a", "rk1", true, true, {}, { feature: "x" })], [group]);
    expect(rules.map((r) => [r.routingKey, r.mappings[0]?.destinations[0]?.host])).toEqual([
      ["rk1", "backend-rk1-local.shop.svc"], ["rkg", "backend-rk1-local.shop.svc"],
    ]);
  });

  it("a local of one member and a fork of the same baseline in another conflict like two forks: neither routes under the group's key", () => {
    const local = withLocal("a", "rk1", true, true, {}, { feature: "x" });
    const fork: PlacedSandbox = {
      sandbox: record("b", "rk2", {
        labels: { feature: "x" },
        forks: [pb.Fork.fromPartial({ forkOf: { kind: "Deployment", namespace: "shop", name: "backend" }, endpoints: [{ name: "http", port: 8080 }] })],
      }),
      placements: [{
        fork: "Deployment shop/backend", baseline: { kind: "Deployment", namespace: "shop", name: "backend" },
        workload: { kind: "Deployment", namespace: "shop", name: "backend-rk2" }, services: [{ host: "backend-rk2.shop.svc", ports: [8080], baselineHost: "" }],
      }],
    };
    const routing = routeGroupRouting(group, [local, fork]);
    expect(routing.conflicts).toEqual([{ baseline: "Deployment shop/backend", sandboxes: ["a", "b"] }]);
    expect(routing.forks).toEqual([]);
    expect(routing.locals).toEqual([]);
    expect(routeGroupStatus(group, routing).reason).toBe("Conflict");
    expect(routingRules([local, fork], [group]).map((r) => r.routingKey)).toEqual(["rk1", "rk2"]);
  });
});
