import { buildVirtualService, routingKeyMatches, virtualServiceName } from "./istio.js";

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const orders = { name: "orders", namespace: "shop", ports: [8080] };
const fork = (routingKey: string, ports = [8080]) => ({ routingKey, service: `orders-${routingKey}`, ports });
const keyMatches = (key: string) => [
  { headers: { baggage: { regex: `^(.*,)?[ \\t]*sd-routing-key[ \\t]*=[ \\t]*${key}[ \\t]*([;,].*)?$` } } },
  { headers: { "ot-baggage-sd-routing-key": { exact: key } } },
  { headers: { "uberctx-sd-routing-key": { exact: key } } },
  { headers: { tracestate: { regex: `^(.*,)?[ \\t]*sd-routing-key[ \\t]*=[ \\t]*${key}[ \\t]*([,].*)?$` } } },
];

describe("the VirtualService of a baseline Service with forks", () => {
  it("routes a sandbox's routing key, in any of its headers, to its fork Service, and the rest to the baseline", () => {
    expect(buildVirtualService(orders, [fork("k3fd0c2a91b7")])).toEqual({
      apiVersion: "networking.istio.io/v1",
      kind: "VirtualService",
      metadata: { name: "ephemera-orders", namespace: "shop", labels: { "ephemera.dev/mesh": "istio", "ephemera.dev/baseline-service": "orders" } },
      spec: {
        hosts: ["orders", "orders.shop.svc.cluster.local"],
        http: [
          {
            name: "sandbox-k3fd0c2a91b7",
            match: keyMatches("k3fd0c2a91b7"),
            route: [{ destination: { host: "orders-k3fd0c2a91b7.shop.svc.cluster.local", port: { number: 8080 } } }],
          },
          { name: "baseline", route: [{ destination: { host: "orders.shop.svc.cluster.local", port: { number: 8080 } } }] },
        ],
      },
    });
    expect(virtualServiceName("orders")).toBe("ephemera-orders");
  });

  it("holds one route per sandbox forking a workload behind the Service, in routing-key order, the baseline last", () => {
    const vs = buildVirtualService(orders, [fork("zz0000000002"), fork("aa0000000001"), fork("mm0000000003")]) as Obj;
    expect(vs["spec"].http.map((r: Obj) => r["name"])).toEqual(["sandbox-aa0000000001", "sandbox-mm0000000003", "sandbox-zz0000000002", "baseline"]);
    expect(vs["spec"].http[1].route[0].destination.host).toBe("orders-mm0000000003.shop.svc.cluster.local");
    expect(vs["spec"].http[1].match).toEqual(keyMatches("mm0000000003"));
    // The same forks in any order make the same object: written again only when they change.
    expect(buildVirtualService(orders, [fork("mm0000000003"), fork("aa0000000001"), fork("zz0000000002")])).toEqual(vs);
  });

  it("gives a Service with several ports a route per sandbox and port, each matching its port; a fork Service without the port gets none there", () => {
    const vs = buildVirtualService({ ...orders, ports: [9090, 8080] }, [fork("bb0000000002", [8080, 9090]), fork("aa0000000001", [8080])], "example.internal") as Obj;
    const http = vs["spec"].http as Obj[];
    expect(http.map((r) => [r["name"], r["route"][0].destination])).toEqual([
      ["sandbox-aa0000000001-8080", { host: "orders-aa0000000001.shop.svc.example.internal", port: { number: 8080 } }],
      ["sandbox-bb0000000002-8080", { host: "orders-bb0000000002.shop.svc.example.internal", port: { number: 8080 } }],
      ["sandbox-bb0000000002-9090", { host: "orders-bb0000000002.shop.svc.example.internal", port: { number: 9090 } }],
      ["baseline-8080", { host: "orders.shop.svc.example.internal", port: { number: 8080 } }],
      ["baseline-9090", { host: "orders.shop.svc.example.internal", port: { number: 9090 } }],
    ]);
    expect(http[2]!["match"]).toEqual(keyMatches("bb0000000002").map((m) => ({ ...m, port: 9090 })));
    expect(http[4]!["match"]).toEqual([{ port: 9090 }]);
    expect(vs["spec"].hosts).toEqual(["orders", "orders.shop.svc.example.internal"]);
  });
});

describe("the matches of a routing key", () => {
  // Istio's regexes match the whole header value (RE2); these use nothing RE2 and JavaScript read differently.
  const [baggage, , , tracestate] = routingKeyMatches("k3fd0c2a91b7").map((m) => Object.values(m["headers"] as Obj)[0].regex as string);
  const matchesBaggage = (value: string) => new RegExp(baggage!).test(value);
  const matchesTracestate = (value: string) => new RegExp(tracestate!).test(value);

  it("finds the key as any member of a baggage list, with properties and spaces around it", () => {
    for (const value of [
      "sd-routing-key=k3fd0c2a91b7", "userid=alice,sd-routing-key=k3fd0c2a91b7", "a=1, sd-routing-key = k3fd0c2a91b7 ;prop=x, b=2",
      "sd-routing-key=k3fd0c2a91b7;ttl=60", "a=1;p=q,\tsd-routing-key=k3fd0c2a91b7",
    ]) expect([value, matchesBaggage(value)]).toEqual([value, true]);
  });

  it("does not take another key, a longer one, or the name inside another member", () => {
    for (const value of [
      "sd-routing-key=k3fd0c2a91b8", "sd-routing-key=k3fd0c2a91b7x", "sd-routing-key=xk3fd0c2a91b7", "x-sd-routing-key=k3fd0c2a91b7",
      "note=sd-routing-key=k3fd0c2a91b7", "sd-routing-key=", "", "sd-routing-key=k3fd0c2a91b",
    ]) expect([value, matchesBaggage(value)]).toEqual([value, false]);
  });

  it("reads tracestate as a list whose values may hold ';'", () => {
    expect(matchesTracestate("congo=t61rcWkgMzE, sd-routing-key=k3fd0c2a91b7")).toBe(true);
    expect(matchesTracestate("sd-routing-key=k3fd0c2a91b7,rojo=00f067aa0ba902b7")).toBe(true);
    expect(matchesTracestate("sd-routing-key=k3fd0c2a91b7;x")).toBe(false);
  });

  it("refuses a routing key that is not lowercase alphanumeric (it is written into a regex)", () => {
    expect(() => routingKeyMatches("a.*")).toThrow('routing key "a.*" is not lowercase alphanumeric');
    expect(() => routingKeyMatches("")).toThrow('routing key "" is not lowercase alphanumeric');
  });
});
