import * as pb from "@ephemera/proto";
import { RoutingTable } from "./table.js";

const { ADD, REMOVE, REPLACE, SYNCED } = pb.routes.WatchOp;
const ORDERS = { kind: "Deployment", namespace: "shop", name: "orders" };

const rule = (routingKey: string, ports: Record<number, string>, baseline = ORDERS): pb.routes.WorkloadRoutingRule => ({
  routingKey,
  baseline,
  destinationSandbox: { name: `sb-${routingKey}` },
  mappings: Object.entries(ports).map(([port, host]) => ({ workloadPort: Number(port), destinations: [{ host, port: Number(port) }] })),
});

const given = (...ops: pb.routes.WorkloadRoutingRuleOp[]) => {
  const table = new RoutingTable(ORDERS);
  table.beginSnapshot();
  for (const op of ops) table.apply(op);
  return table;
};

describe("RoutingTable", () => {
  const fork = "orders-k1.shop.svc";

  it("sends a keyed request to the fork's Service on the rule's port, and everything else to the local app", () => {
    const table = given({ op: ADD, route: rule("k1", { 8080: fork }) }, { op: SYNCED });
    expect(table.destination("k1", 8080)).toEqual({ host: fork, port: 8080 });
    expect(table.destination(undefined, 8080)).toEqual({ host: "127.0.0.1", port: 8080 });
    expect(table.destination("unknown", 8080)).toEqual({ host: "127.0.0.1", port: 8080 });
    // The rule maps 8080 only: the same key on another app port stays local.
    expect(table.destination("k1", 9090)).toEqual({ host: "127.0.0.1", port: 9090 });
  });

  it("maps each of a rule's ports to its own destination, the first one when there are several", () => {
    const route = rule("k1", { 8080: fork });
    route.mappings.push({ workloadPort: 9090, destinations: [{ host: "grpc-k1.shop.svc", port: 19090 }, { host: "other", port: 1 }] });
    route.mappings.push({ workloadPort: 7070, destinations: [] });
    const table = given({ op: ADD, route }, { op: SYNCED });
    expect(table.destination("k1", 9090)).toEqual({ host: "grpc-k1.shop.svc", port: 19090 });
    expect(table.destination("k1", 7070)).toEqual({ host: "127.0.0.1", port: 7070 });
  });

  it("follows REPLACE and REMOVE after SYNCED", () => {
    const table = given({ op: ADD, route: rule("k1", { 8080: fork }) }, { op: ADD, route: rule("k2", { 8080: "orders-k2.shop.svc" }) }, { op: SYNCED });
    table.apply({ op: REPLACE, route: rule("k1", { 8080: "orders-k1-v2.shop.svc" }) });
    table.apply({ op: REMOVE, route: rule("k2", { 8080: "orders-k2.shop.svc" }) });
    expect(table.destination("k1", 8080).host).toBe("orders-k1-v2.shop.svc");
    expect(table.destination("k2", 8080).host).toBe("127.0.0.1");
    expect(table.keys).toEqual(["k1"]);
  });

  it("is ready at the first SYNCED, not before", () => {
    const table = given({ op: ADD, route: rule("k1", { 8080: fork }) });
    expect(table.ready).toBe(false);
    expect(table.destination("k1", 8080).host).toBe("127.0.0.1");
    table.apply({ op: SYNCED });
    expect(table.ready).toBe(true);
  });

  it("serves the last snapshot while a new watch catches up, then the new one whole", () => {
    const table = given({ op: ADD, route: rule("k1", { 8080: fork }) }, { op: ADD, route: rule("k2", { 8080: "orders-k2.shop.svc" }) }, { op: SYNCED });
    table.beginSnapshot();
    table.apply({ op: ADD, route: rule("k3", { 8080: "orders-k3.shop.svc" }) });
    expect(table.keys).toEqual(["k1", "k2"]);
    expect(table.ready).toBe(true);
    table.apply({ op: ADD, route: rule("k1", { 8080: fork }) });
    table.apply({ op: SYNCED });
    // k2 went while the watch was cut: the new snapshot has no rule for it.
    expect(table.keys).toEqual(["k3", "k1"]);
    expect(table.destination("k2", 8080).host).toBe("127.0.0.1");
  });

  it("keeps no rule for another workload or without a routing key", () => {
    const table = given(
      { op: ADD, route: rule("k1", { 8080: fork }, { ...ORDERS, name: "cart" }) },
      { op: ADD, route: rule("k2", { 8080: fork }, { ...ORDERS, kind: "StatefulSet" }) },
      { op: ADD, route: rule("", { 8080: fork }) },
      { op: ADD },
      { op: SYNCED },
    );
    expect(table.keys).toEqual([]);
  });
});
