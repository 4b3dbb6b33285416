import { buildLocalObjects, parseAddress, targetPortOf } from "./local-build.js";

const workload = { spec: { template: { spec: { containers: [{ name: "web", ports: [{ name: "http", containerPort: 8080 }, { name: "grpc", containerPort: 9090 }] }] } } } };
const service = (ports: unknown[]) => ({ metadata: { name: "api", namespace: "shop" }, spec: { selector: { app: "api" }, ports } });

describe("a local workload's Service and Endpoints", () => {
  it("reads tunnel addresses as ip and port, refusing a hostname or a bad port", () => {
    expect(parseAddress("10.0.0.9:41000")).toEqual({ ip: "10.0.0.9", port: 41000 });
    expect(parseAddress("[fd00::9]:41000")).toEqual({ ip: "fd00::9", port: 41000 });
    expect(parseAddress("tunnel.ephemera.svc:41000")).toBeUndefined();
    expect(parseAddress("10.0.0.9:0")).toBeUndefined();
  });

  it("resolves a targetPort: a number, a container port's name, the port itself when unset", () => {
    const containers = [{ name: "http", containerPort: 8080 }];
    expect(targetPortOf({ port: 80, targetPort: 8080 }, containers)).toBe(8080);
    expect(targetPortOf({ port: 80, targetPort: "http" }, containers)).toBe(8080);
    expect(targetPortOf({ port: 80 }, containers)).toBe(80);
    expect(targetPortOf({ port: 80, targetPort: "metrics" }, containers)).toBeUndefined();
  });

  it("keeps each port a tunnel address serves, grouping the Endpoints' ports by address; none served, none built", () => {
    const built = buildLocalObjects(service([
      { name: "http", port: 80, targetPort: "http" }, { name: "grpc", port: 9090, targetPort: "grpc" }, { name: "admin", port: 9000 },
    ]), workload, {
      sandbox: "sb", routingKey: "rk1", local: "api",
      addresses: [{ port: 8080, address: "10.0.0.9:41000" }, { port: 9090, address: "10.0.0.10:41001" }],
    })!;
    expect(built.service).toMatchObject({
      metadata: { name: "api-rk1-local", namespace: "shop", labels: { "ephemera.dev/routing-key": "rk1", "ephemera.dev/local": "api", "ephemera.dev/baseline-service": "api" } },
      spec: { ports: [{ name: "http", port: 80, targetPort: 41000, protocol: "TCP" }, { name: "grpc", port: 9090, targetPort: 41001, protocol: "TCP" }] },
    });
    expect((built.service["spec"] as Record<string, unknown>)["selector"]).toBeUndefined();
    expect(built.endpoints["subsets"]).toEqual([
      { addresses: [{ ip: "10.0.0.9" }], ports: [{ name: "http", port: 41000, protocol: "TCP" }] },
      { addresses: [{ ip: "10.0.0.10" }], ports: [{ name: "grpc", port: 41001, protocol: "TCP" }] },
    ]);
    expect(built.routes).toEqual([{ workloadPort: 8080, port: 80 }, { workloadPort: 9090, port: 9090 }]);
    expect(buildLocalObjects(service([{ name: "admin", port: 9000 }]), workload, { sandbox: "sb", routingKey: "rk1", local: "api", addresses: [{ port: 8080, address: "10.0.0.9:41000" }] }))
      .toBeUndefined();
  });
});
