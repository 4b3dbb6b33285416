import { DEFAULT_SNIFF_TIMEOUT_MS, parsePorts, parseWorkload, routerConfig, type RouterConfigError } from "./config.js";

const ENV = {
  EPHEMERA_ROUTER_WORKLOAD: "Deployment/shop/orders",
  EPHEMERA_ROUTER_PORTS: "8080:15000,9090:15001",
};

const problems = (env: Record<string, string | undefined>) => {
  try {
    routerConfig(env);
  } catch (err) {
    return (err as RouterConfigError).problems;
  }
  throw new Error("the configuration was accepted");
};

describe("routerConfig", () => {
  it("reads the workload, the ports, and the defaults of the rest", () => {
    expect(routerConfig(ENV)).toEqual({
      workload: { kind: "Deployment", namespace: "shop", name: "orders" },
      ports: [{ appPort: 8080, listenPort: 15000 }, { appPort: 9090, listenPort: 15001 }],
      routes: "routeserver.ephemera.svc:7777",
      healthListen: "0.0.0.0:15020",
      sniffTimeoutMs: DEFAULT_SNIFF_TIMEOUT_MS,
    });
  });

  it("takes the Routes API's address, a token, the health address and the sniff timeout when given", () => {
    const config = routerConfig({
      ...ENV, EPHEMERA_ROUTES: "host.kube-sim.internal:40123", EPHEMERA_TOKEN: "viewer-token",
      EPHEMERA_ROUTER_HEALTH_LISTEN: "127.0.0.1:16020", EPHEMERA_ROUTER_SNIFF_TIMEOUT_MS: "250",
    });
    expect(config).toMatchObject({ routes: "host.kube-sim.internal:40123", token: "viewer-token", healthListen: "127.0.0.1:16020", sniffTimeoutMs: 250 });
  });

  it("names every missing variable at once", () => {
    expect(problems({})).toEqual(["EPHEMERA_ROUTER_WORKLOAD is not set", "EPHEMERA_ROUTER_PORTS is not set"]);
  });

  it("names the variable of each bad value, and never prints the token", () => {
    const found = problems({
      EPHEMERA_ROUTER_WORKLOAD: "orders", EPHEMERA_ROUTER_PORTS: "8080", EPHEMERA_ROUTES: "routeserver",
      EPHEMERA_ROUTER_HEALTH_LISTEN: "0.0.0.0:http", EPHEMERA_TOKEN: "s3cret-token", EPHEMERA_ROUTER_SNIFF_TIMEOUT_MS: "-1",
    });
    expect(found).toEqual([
      'EPHEMERA_ROUTER_WORKLOAD must be <Kind>/<namespace>/<name> (e.g. Deployment/shop/orders), got "orders"',
      'EPHEMERA_ROUTER_PORTS: "8080" is not <appPort>:<listenPort> with ports from 1 to 65535',
      'EPHEMERA_ROUTES must be host:port (e.g. routeserver.ephemera.svc:7777), got "routeserver"',
      'EPHEMERA_ROUTER_HEALTH_LISTEN must be host:port (e.g. 0.0.0.0:15020), got "0.0.0.0:http"',
      'EPHEMERA_ROUTER_SNIFF_TIMEOUT_MS must be a non-negative integer, got "-1"',
    ]);
    expect(found.join("\n")).not.toContain("s3cret-token");
  });

  it("refuses a health port that is also a router or app port", () => {
    expect(problems({ ...ENV, EPHEMERA_ROUTER_HEALTH_LISTEN: "0.0.0.0:15001" })).toEqual([
      "EPHEMERA_ROUTER_HEALTH_LISTEN's port 15001 is also in EPHEMERA_ROUTER_PORTS (9090:15001); give it a port of its own",
    ]);
  });

  it("names TLS settings that do not go together", () => {
    expect(problems({ ...ENV, EPHEMERA_TLS_CLIENT_CERT: "/no/cert.pem" })).toEqual([
      "EPHEMERA_TLS_CLIENT_CERT and EPHEMERA_TLS_CLIENT_KEY go together; one of them is empty",
    ]);
  });
});

describe("parseWorkload", () => {
  it("reads the three kinds ephemera forks", () => {
    expect(parseWorkload("StatefulSet/db/pg")).toEqual({ kind: "StatefulSet", namespace: "db", name: "pg" });
    expect(parseWorkload("Rollout/shop/web.v2")).toEqual({ kind: "Rollout", namespace: "shop", name: "web.v2" });
  });

  it.each([
    ["Deployment/shop", 'EPHEMERA_ROUTER_WORKLOAD must be <Kind>/<namespace>/<name> (e.g. Deployment/shop/orders), got "Deployment/shop"'],
    ["Deployment/shop/orders/x", 'EPHEMERA_ROUTER_WORKLOAD must be <Kind>/<namespace>/<name> (e.g. Deployment/shop/orders), got "Deployment/shop/orders/x"'],
    ["DaemonSet/kube-system/proxy", 'EPHEMERA_ROUTER_WORKLOAD: the kind must be one of Deployment, Rollout, StatefulSet, got "DaemonSet"'],
    ["Deployment/Shop/orders", 'EPHEMERA_ROUTER_WORKLOAD: the namespace must be a DNS label (lowercase letters, digits, \'-\'), got "Shop"'],
    ["Deployment/shop/orders_v2", 'EPHEMERA_ROUTER_WORKLOAD: the name must be a DNS subdomain (lowercase letters, digits, \'-\', \'.\'), got "orders_v2"'],
  ])("refuses %s", (value, message) => {
    expect(() => parseWorkload(value)).toThrow(new Error(message));
  });
});

describe("parsePorts", () => {
  it("reads pairs separated by commas, whitespace and a trailing comma allowed", () => {
    expect(parsePorts(" 8080:15000 , 50051:15001,")).toEqual([{ appPort: 8080, listenPort: 15000 }, { appPort: 50051, listenPort: 15001 }]);
  });

  it.each([
    ["", 'EPHEMERA_ROUTER_PORTS must list <appPort>:<listenPort> pairs separated by commas (e.g. 8080:15000,9090:15001), got ""'],
    ["8080:15000,0:15001", 'EPHEMERA_ROUTER_PORTS: "0:15001" is not <appPort>:<listenPort> with ports from 1 to 65535'],
    ["8080:70000", 'EPHEMERA_ROUTER_PORTS: "8080:70000" is not <appPort>:<listenPort> with ports from 1 to 65535'],
    ["8080:15000,8080:15001", "EPHEMERA_ROUTER_PORTS: app port 8080 is mapped twice"],
    ["8080:15000,9090:15000", "EPHEMERA_ROUTER_PORTS: listen port 15000 is used twice"],
    ["8080:9090,9090:15001", "EPHEMERA_ROUTER_PORTS: listen port 9090 is also an app port; the router would capture its own traffic"],
  ])("refuses %j", (value, message) => {
    expect(() => parsePorts(value)).toThrow(new Error(message));
  });
});
