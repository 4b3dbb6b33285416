import * as pb from "@ephemera/proto";
import type { SandboxRecord } from "../sandbox/state.js";
import { forkName } from "@ephemera/kit";
import { clusterServices, diff, keyOf, matches, routingRules, type PlacedSandbox } from "./rules.js";
import type { RouteGroupRecord } from "../routegroup/state.js";

type ForkSpec = { name: string; ns: string; port: number; services?: Array<{ host: string; ports: number[]; baselineHost?: string }>; declared?: boolean };

/**
 * A sandbox with forks, each placed on the cluster (its Service `<name>-<rk>` with the
 * fork's port, standing for the baseline Service `<name>`, unless given).
 */
const sandbox = (name: string, routingKey: string, over: Partial<SandboxRecord> = {}, forks: ForkSpec[] = [{ name: "orders", ns: "shop", port: 8080 }], placed = true): PlacedSandbox => ({
  sandbox: {
    status: "active", name, routingKey, cluster: "c1", endpoints: [], resources: [], ready: true, forced: false,
    createdAt: "", updatedAt: "", specUpdatedAt: "", deleteReason: "",
    forks: { generation: 1, requested: 1, requestedCount: forks.length, available: 1, skipped: false },
    spec: pb.SandboxSpec.fromPartial({
      cluster: "c1",
      forks: forks.map((f) => ({
        forkOf: { kind: "Deployment", namespace: f.ns, name: f.name },
        endpoints: f.declared === false ? [] : [{ name: "http", port: f.port, protocol: "http" }],
      })),
    }),
    ...over,
  },
  placements: placed ? forks.map((f) => ({
    fork: `Deployment ${f.ns}/${f.name}`,
    baseline: { kind: "Deployment", namespace: f.ns, name: f.name },
    workload: { kind: "Deployment", namespace: f.ns, name: forkName(f.name, routingKey) },
    services: (f.services ?? [{ host: `${forkName(f.name, routingKey)}.${f.ns}.svc`, ports: [f.port], baselineHost: `${f.name}.${f.ns}.svc` }])
      .map((x) => ({ baselineHost: "", ...x })),
  })) : [],
});

describe("routing rules from sandboxes", () => {
  it("makes one rule per fork of a ready sandbox: its baseline, routing key and sandbox, each port sent to the fork's Service", () => {
    expect(routingRules([sandbox("a", "rk1")])).toEqual([{
      routingKey: "rk1",
      baseline: { kind: "Deployment", namespace: "shop", name: "orders" },
      destinationSandbox: { name: "a" },
      mappings: [{ workloadPort: 8080, destinations: [{ host: "orders-rk1.shop.svc", port: 8080 }] }],
    }]);
  });

  it("leaves out sandboxes never ready yet, being deleted or gone, and forks not on the cluster; keeps one whose update rolls out", () => {
    const rolling = { generation: 2, requested: 2, requestedCount: 1, available: 1, skipped: false };
    expect(routingRules([sandbox("u", "rk9", { ready: false, forks: rolling })]).map((r) => r.routingKey)).toEqual(["rk9"]);
    expect(routingRules([
      sandbox("a", "rk1", { ready: false, forks: { ...rolling, available: 0 } }), sandbox("b", "rk2", { status: "deleting" }), sandbox("c", "rk3", { status: "deleted" }),
      sandbox("d", "rk4", {}, undefined, false),
    ])).toEqual([]);
  });

  it("sends each port to the fork Service that serves it; without declared ports, every port of the fork's Services", () => {
    const services = [{ host: "orders-http-rk1.shop.svc", ports: [8080] }, { host: "orders-grpc-rk1.shop.svc", ports: [9090, 9091] }];
    const [rule] = routingRules([sandbox("a", "rk1", {}, [{ name: "orders", ns: "shop", port: 9090, services, declared: false }])]);
    expect(rule!.mappings).toEqual([
      { workloadPort: 8080, destinations: [{ host: "orders-http-rk1.shop.svc", port: 8080 }] },
      { workloadPort: 9090, destinations: [{ host: "orders-grpc-rk1.shop.svc", port: 9090 }] },
      { workloadPort: 9091, destinations: [{ host: "orders-grpc-rk1.shop.svc", port: 9091 }] },
    ]);
    const [declared] = routingRules([sandbox("a", "rk1", {}, [{ name: "orders", ns: "shop", port: 9090, services }])]);
    expect(declared!.mappings).toEqual([{ workloadPort: 9090, destinations: [{ host: "orders-grpc-rk1.shop.svc", port: 9090 }] }]);
  });

  it("names a fork as a DNS label of at most 63 characters, the same each time", () => {
    const long = forkName("x".repeat(80), "abcdef123456");
    expect(long.length).toBeLessThanOrEqual(63);
    expect(long.endsWith("-abcdef123456")).toBe(true);
    expect(forkName("orders", "rk1")).toBe("orders-rk1");
    // Two baselines whose names share the part that fits still get two forks (the runner names them with the same function).
    expect(forkName(`${"x".repeat(80)}-a`, "abcdef123456")).not.toBe(forkName(`${"x".repeat(80)}-b`, "abcdef123456"));
  });

  it("routes a fork recorded without its Services to the fork Service the runner names, long names included", () => {
    const name = `${"inventory-reconciliation-".repeat(3)}worker`;
    const [rule] = routingRules([sandbox("a", "rk1", {}, [{ name, ns: "shop", port: 8080, services: [] }])]);
    expect(rule!.mappings[0]!.destinations[0]!.host).toBe(`${forkName(name, "rk1")}.shop.svc`);
    expect(forkName(name, "rk1")).toMatch(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/);
  });

  it("filters by baseline kind, namespace and name, routing key and destination sandbox; an empty field matches all", () => {
    const rules = routingRules([sandbox("a", "rk1"), sandbox("b", "rk2", {}, [{ name: "cart", ns: "shop", port: 9090 }])]);
    const req = (r: Partial<pb.routes.WorkloadRoutingRulesRequest>) => pb.routes.WorkloadRoutingRulesRequest.fromPartial(r);
    const pick = (r: Partial<pb.routes.WorkloadRoutingRulesRequest>) => rules.filter((x) => matches(x, req(r))).map((x) => x.routingKey);
    expect(pick({})).toEqual(["rk2", "rk1"]); // by baseline, then routing key: cart before orders
    expect(pick({ baselineWorkload: { kind: "", namespace: "", name: "orders" } })).toEqual(["rk1"]);
    expect(pick({ baselineWorkload: { kind: "Rollout", namespace: "", name: "" } })).toEqual([]);
    expect(pick({ baselineWorkload: { kind: "", namespace: "other", name: "" } })).toEqual([]);
    expect(pick({ routingKey: "rk2" })).toEqual(["rk2"]);
    expect(pick({ destinationSandbox: { name: "a" } })).toEqual(["rk1"]);
  });

  it("turns one set of rules into another with ADD, REMOVE and REPLACE", () => {
    const before = routingRules([sandbox("a", "rk1"), sandbox("b", "rk2")]);
    const after = routingRules([sandbox("a", "rk1", {}, [{ name: "orders", ns: "shop", port: 9999 }]), sandbox("c", "rk3")]);
    const ops = diff(before, after).map((o) => [pb.routes.WatchOp[o.op], o.route ? keyOf(o.route) : ""]);
    expect(ops.sort()).toEqual([
      ["ADD", "Deployment/shop/orders@rk3"], ["REMOVE", "Deployment/shop/orders@rk2"], ["REPLACE", "Deployment/shop/orders@rk1"],
    ].sort());
    expect(diff(after, after)).toEqual([]);
  });
});

describe("the cluster's Services (GetClusterServices)", () => {
  const port = (n: number, name = `port-${n}`, protocol = "TCP") => ({ name, port: n, protocol, appProtocol: "" });

  it("lists the baseline Services behind the forked workloads once each, then every fork Service with its sandbox's key and baseline Service", () => {
    const cart = { name: "cart", ns: "shop", port: 9090, declared: false, services: [
      { host: "cart-web-rk2.shop.svc", ports: [80, 9090], baselineHost: "cart-web.shop.svc" },
      { host: "cart-admin-rk2.shop.svc", ports: [9900], baselineHost: "cart-admin.shop.svc" },
    ] };
    expect(clusterServices([sandbox("a", "rk1"), sandbox("b", "rk2", {}, [{ name: "orders", ns: "shop", port: 8080 }, cart])])).toEqual([
      { serviceIp: "", hostname: "cart-admin.shop.svc", ports: [port(9900)] },
      { serviceIp: "", hostname: "cart-web.shop.svc", ports: [port(80), port(9090)] },
      { serviceIp: "", hostname: "orders.shop.svc", ports: [port(8080)] },
      { serviceIp: "", hostname: "orders-rk1.shop.svc", ports: [port(8080, "http", "http")], sandboxInfo: { sandboxRoutingKey: "rk1", baselineHostname: "orders.shop.svc" } },
      { serviceIp: "", hostname: "orders-rk2.shop.svc", ports: [port(8080, "http", "http")], sandboxInfo: { sandboxRoutingKey: "rk2", baselineHostname: "orders.shop.svc" } },
      { serviceIp: "", hostname: "cart-web-rk2.shop.svc", ports: [port(80), port(9090)], sandboxInfo: { sandboxRoutingKey: "rk2", baselineHostname: "cart-web.shop.svc" } },
      { serviceIp: "", hostname: "cart-admin-rk2.shop.svc", ports: [port(9900)], sandboxInfo: { sandboxRoutingKey: "rk2", baselineHostname: "cart-admin.shop.svc" } },
    ]);
  });

  it("lists a baseline Service only while a sandbox that routes forks a workload behind it", () => {
    expect(clusterServices([sandbox("a", "rk1", { status: "deleting" }), sandbox("b", "rk2", {}, undefined, false)])).toEqual([]);
  });

  it("names the baseline workload's host for a fork recorded before the runner named its baseline Service", () => {
    const old = { name: "orders", ns: "shop", port: 8080, services: [{ host: "orders-web-rk1.shop.svc", ports: [8080] }] };
    expect(clusterServices([sandbox("a", "rk1", {}, [old])])).toEqual([
      { serviceIp: "", hostname: "orders-web-rk1.shop.svc", ports: [port(8080, "http", "http")], sandboxInfo: { sandboxRoutingKey: "rk1", baselineHostname: "orders.shop.svc" } },
    ]);
  });
});

describe("routing rules of route groups", () => {
  const group = (match: pb.RouteGroupMatch, cluster = "c1"): RouteGroupRecord => ({
    status: "active", name: "g", routingKey: "rkg", cluster, spec: pb.RouteGroupSpec.fromPartial({ cluster, match }), endpoints: [], createdAt: "", updatedAt: "",
  });
  const labelled = (labels: Record<string, string>, s: PlacedSandbox): PlacedSandbox =>
    ({ ...s, sandbox: { ...s.sandbox, spec: { ...s.sandbox.spec!, labels } } });
  const x = pb.RouteGroupMatch.fromPartial({ label: { key: "feature", value: "x-*" } });

  it("adds, under the group's key, a rule per routed fork of each sandbox of its cluster its match selects", () => {
    const a = labelled({ feature: "x-a" }, sandbox("a", "rk1"));
    const b = labelled({ feature: "y" }, sandbox("b", "rk2", {}, [{ name: "cart", ns: "shop", port: 9090 }]));
    const rules = routingRules([a, b], [group(x)]);
    expect(rules.map((r) => [r.routingKey, r.baseline?.name, r.destinationSandbox?.name])).toEqual([
      ["rk1", "orders", "a"], ["rkg", "orders", "a"], ["rk2", "cart", "b"],
    ].sort((p, q) => `Deployment/shop/${p[1]}@${p[0]}`.localeCompare(`Deployment/shop/${q[1]}@${q[0]}`)));
    const [own, ofGroup] = rules.filter((r) => r.destinationSandbox?.name === "a");
    expect(ofGroup?.mappings).toEqual(own?.mappings);
  });

  it("leaves out sandboxes of other clusters, being deleted or not routing yet, and a deleted group", () => {
    const routed = (sandboxes: PlacedSandbox[], g = group(x)) => routingRules(sandboxes, [g]).filter((r) => r.routingKey === "rkg").length;
    expect(routed([labelled({ feature: "x-a" }, sandbox("a", "rk1", { cluster: "c2" }))])).toBe(0);
    expect(routed([labelled({ feature: "x-a" }, sandbox("a", "rk1", { status: "deleting" }))])).toBe(0);
    expect(routed([labelled({ feature: "x-a" }, sandbox("a", "rk1", { ready: false, forks: { generation: 1, requested: 1, requestedCount: 1, available: 0, skipped: false } }))])).toBe(0);
    expect(routed([labelled({ feature: "x-a" }, sandbox("a", "rk1"))], { ...group(x), status: "deleted" })).toBe(0);
    expect(routed([labelled({ feature: "x-a" }, sandbox("a", "rk1"))])).toBe(1);
  });

  it("routes no baseline two members fork, and the others as usual", () => {
    const a = labelled({ feature: "x-a" }, sandbox("a", "rk1", {}, [{ name: "orders", ns: "shop", port: 8080 }, { name: "cart", ns: "shop", port: 9090 }]));
    const b = labelled({ feature: "x-b" }, sandbox("b", "rk2"));
    const ofGroup = routingRules([a, b], [group(x)]).filter((r) => r.routingKey === "rkg");
    expect(ofGroup.map((r) => [r.baseline?.name, r.destinationSandbox?.name])).toEqual([["cart", "a"]]);
  });
});
