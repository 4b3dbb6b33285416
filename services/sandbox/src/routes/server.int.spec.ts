// The Routes API behind the API's bearer tokens: the real sandbox service on the real NATS,
// with a tokens file. Every method, over gRPC and HTTP, refuses a call without a valid
// token (UNAUTHENTICATED, 401) and serves a viewer; without tokens it stays on loopback
// unless told otherwise, with the same refusal as the API. GetClusterServices lists the
// baseline Services and fork Services a runner recorded for a sandbox with forks.
import { get as httpsGet } from "node:https";
import { call, channelCredentials, clientOptions, createLogger, grpc, waitFor } from "@ephemera/kit";
import * as pb from "@ephemera/proto";
import { Aggregates, decode, encode, ev, type DomainEvent } from "@ephemera/events";
import { JetStreamEventStore, connectNats, type EventStore } from "@ephemera/eventstore";
import { TOKENS, tokensAccess } from "../../../../test/support/api-tokens.js";
import { makeCerts } from "../../../../test/support/certs.js";
import { testNats } from "../../../../test/support/servers.js";
import { start } from "../index.js";

type Running = Awaited<ReturnType<typeof start>>;
const logger = createLogger("routes-test", "silent");
const nats = testNats("routes");

const config = (overrides: Partial<Parameters<typeof start>[0]> = {}): Parameters<typeof start>[0] => ({
  natsUrl: nats.url, redisUrl: "", prefix: nats.prefix, streamReplicas: 1, listen: "127.0.0.1:0", previewDomain: "preview.test",
  routes: { listen: "127.0.0.1:0", httpListen: "127.0.0.1:0" }, ...overrides,
});

afterAll(async () => {
  const nc = await connectNats(nats.url, "cleanup");
  await nats.cleanup(nc);
  await nc.close();
});

describe("the Routes API with API tokens", () => {
  let service: Running;
  let client: pb.routes.RoutesClient;
  let http: string;

  beforeAll(async () => {
    service = await start(config({ access: tokensAccess() }), logger);
    client = new pb.routes.RoutesClient(`127.0.0.1:${service.routes!.port}`, grpc.credentials.createInsecure());
    http = `http://127.0.0.1:${service.routes!.httpPort}`;
  });
  afterAll(async () => {
    client?.close();
    await service?.stop();
  });

  const metadata = (bearer?: string) => {
    const m = new grpc.Metadata();
    if (bearer) m.set("authorization", bearer);
    return m;
  };
  const deadline = () => ({ deadline: Date.now() + 5_000 });
  const unary = <Req, Res>(fn: (req: Req, md: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: Res) => void) => unknown,
    req: Req, bearer?: string) =>
    new Promise<{ code: grpc.status; details: string }>((resolve) => {
      fn.call(client, req, metadata(bearer), deadline(), (err) => resolve(err ? { code: err.code, details: err.details } : { code: grpc.status.OK, details: "" }));
    });
  const rules = (bearer?: string) => unary(client.getWorkloadRoutingRules, pb.routes.WorkloadRoutingRulesRequest.fromPartial({}), bearer);
  const services = (bearer?: string) => unary(client.getClusterServices, pb.routes.GetClusterServicesRequest.fromPartial({}), bearer);
  const watch = (bearer?: string) => new Promise<{ code: grpc.status; details: string; ops: pb.routes.WatchOp[] }>((resolve) => {
    const ops: pb.routes.WatchOp[] = [];
    const stream = client.watchWorkloadRoutingRules(pb.routes.WorkloadRoutingRulesRequest.fromPartial({}), metadata(bearer), deadline());
    stream.on("data", (r: pb.routes.WorkloadRoutingRuleOp) => {
      ops.push(r.op);
      if (r.op === pb.routes.WatchOp.SYNCED) stream.cancel();
    });
    stream.on("error", (err: grpc.ServiceError) => resolve({ code: err.code === grpc.status.CANCELLED ? grpc.status.OK : err.code, details: err.details, ops }));
    stream.on("end", () => resolve({ code: grpc.status.OK, details: "", ops }));
  });
  const get = (path: string, bearer?: string) => fetch(`${http}${path}`, bearer ? { headers: { authorization: bearer } } : {});

  it("refuses every gRPC method without a token, or with one it does not know", async () => {
    for (const bearer of [undefined, "Bearer not-a-token", "Basic abc"]) {
      expect(await rules(bearer)).toMatchObject({ code: grpc.status.UNAUTHENTICATED });
      expect(await services(bearer)).toMatchObject({ code: grpc.status.UNAUTHENTICATED });
      expect(await watch(bearer)).toMatchObject({ code: grpc.status.UNAUTHENTICATED, ops: [] });
    }
    expect((await rules()).details).toBe("missing bearer token");
  });

  it("serves a viewer's token, and every role above it, over gRPC", async () => {
    for (const role of ["viewer", "editor", "admin"] as const) {
      const bearer = `Bearer ${TOKENS[role]}`;
      expect(await rules(bearer)).toEqual({ code: grpc.status.OK, details: "" });
      expect(await services(bearer)).toEqual({ code: grpc.status.OK, details: "" });
      expect(await watch(bearer)).toMatchObject({ code: grpc.status.OK, ops: [pb.routes.WatchOp.SYNCED] });
    }
  });

  it("answers 401 over HTTP without a valid token, with a Bearer challenge and no rules", async () => {
    for (const path of ["/api/v1/workloads/routing-rules", "/api/v1/cluster-services", "/no/such/path"]) {
      for (const bearer of [undefined, "Bearer not-a-token"]) {
        const res = await get(path, bearer);
        expect(res.status).toBe(401);
        expect(res.headers.get("www-authenticate")).toBe('Bearer realm="ephemera routes"');
        const body = await res.json() as { error: string };
        expect(body).toEqual({ error: bearer ? "token not recognised" : "missing bearer token" });
      }
    }
  });

  it("serves a viewer's token over HTTP", async () => {
    const res = await get("/api/v1/workloads/routing-rules?routingKey=abc", `Bearer ${TOKENS.viewer}`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({}); // proto3 JSON leaves an empty list out
    const services = await get("/api/v1/cluster-services", `Bearer ${TOKENS.viewer}`);
    expect(services.status).toBe(200);
    expect(await services.json()).toEqual({});
  });
});

describe("the Routes API without API tokens", () => {
  it("is served on loopback, as the API is", async () => {
    const service = await start(config(), logger);
    try {
      const res = await fetch(`http://127.0.0.1:${service.routes!.httpPort}/api/v1/cluster-services`);
      expect(res.status).toBe(200);
    } finally {
      await service.stop();
    }
  });

  it.each([
    ["gRPC", { listen: "0.0.0.0:0", httpListen: "127.0.0.1:0" }, "0.0.0.0:0"],
    ["HTTP", { listen: "127.0.0.1:0", httpListen: "0.0.0.0:0" }, "0.0.0.0:0"],
  ])("refuses to start open on an address other machines reach (%s)", async (_, routes, address) => {
    const started: Running | unknown = await start(config({ routes }), logger).catch((err: unknown) => err);
    if (!(started instanceof Error)) await (started as Running).stop();
    expect(started).toEqual(new Error(
      `the Routes API on ${address} is open: no EPHEMERA_API_TOKENS or EPHEMERA_API_JWKS, so anyone who reaches it may read every sandbox's routes, ` +
      "from other machines too. Set EPHEMERA_API_TOKENS or EPHEMERA_API_JWKS (docs/security.md), listen on loopback, or set EPHEMERA_API_ALLOW_OPEN=true"));
  });

  it("starts open on such an address when EPHEMERA_API_ALLOW_OPEN says so", async () => {
    const service = await start(config({ routes: { listen: "127.0.0.1:0", httpListen: "0.0.0.0:0" }, allowOpen: true }), logger);
    try {
      expect((await fetch(`http://127.0.0.1:${service.routes!.httpPort}/api/v1/cluster-services`)).status).toBe(200);
    } finally {
      await service.stop();
    }
  });
});

describe("the Routes API with the API's certificate", () => {
  const certs = makeCerts();
  let service: Running;
  afterAll(async () => {
    await service?.stop();
    certs.remove();
  });

  it("serves gRPC and HTTP over TLS, as the API does, so tokens never cross the network in clear", async () => {
    service = await start(config({ access: tokensAccess(), tls: certs.server() }), logger);
    const { credentials, options } = channelCredentials(certs.client());
    const client = new pb.routes.RoutesClient(`127.0.0.1:${service.routes!.port}`, credentials, { ...clientOptions, ...options });
    const metadata = new grpc.Metadata();
    metadata.set("authorization", `Bearer ${TOKENS.viewer}`);
    const code = await new Promise<grpc.status>((resolve) => client.getClusterServices({}, metadata, { deadline: Date.now() + 5_000 },
      (err) => resolve(err ? err.code : grpc.status.OK)));
    client.close();
    expect(code).toBe(grpc.status.OK);

    const https = (ca: string) => new Promise<number>((resolve, reject) => {
      httpsGet(`https://127.0.0.1:${service.routes!.httpPort}/api/v1/cluster-services`,
        { ca, headers: { authorization: `Bearer ${TOKENS.viewer}` } }, (res) => { res.resume(); resolve(res.statusCode ?? 0); }).on("error", reject);
    });
    expect(await https(certs.client().ca!)).toBe(200);
    // Plain HTTP is not answered.
    await expect(fetch(`http://127.0.0.1:${service.routes!.httpPort}/api/v1/cluster-services`)).rejects.toThrow();
  });
});

describe("GetClusterServices with a sandbox's forks on its cluster", () => {
  let service: Running;
  let store: EventStore;
  let nc: Awaited<ReturnType<typeof connectNats>>;
  beforeAll(async () => {
    service = await start(config(), logger);
    nc = await connectNats(nats.url, "routes-test-runner");
    store = await JetStreamEventStore.open(nc, { prefix: nats.prefix, logger });
  });
  afterAll(async () => {
    await service?.stop();
    await nc?.close();
  });

  /** What the runner of the sandbox's cluster records, as it would. */
  const asRunner = async (routingKey: string, events: DomainEvent[]) => {
    const current = await store.read(Aggregates.forks, routingKey);
    await store.append(Aggregates.forks, routingKey, { revision: current.revision, version: current.version }, events.map(encode), { source: "runner" });
  };

  it("lists the baseline Services behind the forked workloads, and each fork Service with its baseline Service, over gRPC and HTTP", async () => {
    const api = new pb.SandboxServiceClient(`127.0.0.1:${service.port}`, grpc.credentials.createInsecure());
    const routes = new pb.routes.RoutesClient(`127.0.0.1:${service.routes!.port}`, grpc.credentials.createInsecure());
    try {
      const sandbox = pb.Sandbox.fromJSON({
        name: "listed", spec: { cluster: "c1", forks: [{ forkOf: { kind: "Deployment", namespace: "shop", name: "orders" } }] },
      });
      const applied = await call(api.apply.bind(api), { sandbox, dryRun: false });
      const routingKey = applied.sandbox!.routingKey;
      // No resources: the forks are asked for at once.
      await waitFor(async () => (await store.read(Aggregates.sandbox, "listed")).events.some((e) => decode(e)?.type === "ephemera.sandbox.forks_requested.v1"),
        { timeoutMs: 10_000, what: "the forks asked for" });
      const fork = pb.ForkPlacement.fromPartial({
        fork: "Deployment shop/orders",
        baseline: { kind: "Deployment", namespace: "shop", name: "orders" },
        workload: { kind: "Deployment", namespace: "shop", name: `orders-${routingKey}` },
        // Two Services in front of the baseline's pods, named apart from the Deployment.
        services: [
          { host: `web-${routingKey}.shop.svc`, ports: [8080], baselineHost: "web.shop.svc" },
          { host: `admin-${routingKey}.shop.svc`, ports: [9090, 9091], baselineHost: "admin.shop.svc" },
        ],
      });
      await asRunner(routingKey, [ev("ephemera.forks.applied.v1", { sandbox: "listed", generation: 1, forks: [fork] })]);
      await asRunner(routingKey, [ev("ephemera.forks.available.v1", { sandbox: "listed", generation: 1 })]);

      const port = (n: number) => ({ name: `port-${n}`, port: n, protocol: "TCP", appProtocol: "" });
      const expected: pb.routes.ClusterService[] = [
        { serviceIp: "", hostname: "admin.shop.svc", ports: [port(9090), port(9091)] },
        { serviceIp: "", hostname: "web.shop.svc", ports: [port(8080)] },
        { serviceIp: "", hostname: `web-${routingKey}.shop.svc`, ports: [port(8080)], sandboxInfo: { sandboxRoutingKey: routingKey, baselineHostname: "web.shop.svc" } },
        { serviceIp: "", hostname: `admin-${routingKey}.shop.svc`, ports: [port(9090), port(9091)], sandboxInfo: { sandboxRoutingKey: routingKey, baselineHostname: "admin.shop.svc" } },
      ];
      const listed = () => call<pb.routes.GetClusterServicesRequest, pb.routes.GetClusterServicesResponse>(routes.getClusterServices.bind(routes), {});
      await waitFor(async () => (await listed()).services.length > 0, { timeoutMs: 10_000, what: "the sandbox ready and routing" });
      expect((await listed()).services).toEqual(expected);
      const http = await fetch(`http://127.0.0.1:${service.routes!.httpPort}/api/v1/cluster-services`);
      expect(await http.json()).toEqual(pb.routes.GetClusterServicesResponse.toJSON({ services: expected }));

      // Deleted: neither its forks nor the baselines behind them are listed any more.
      await call(api.delete.bind(api), { name: "listed", force: true });
      await waitFor(async () => (await listed()).services.length === 0, { timeoutMs: 10_000, what: "the services gone with the sandbox" });
    } finally {
      api.close();
      routes.close();
    }
  });
});
