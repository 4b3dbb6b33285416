// The Routes API (package `routes`, service `Routes`, wire-compatible with Signadot's public
// routes.proto) in the sandbox service, which holds the sandboxes it derives the rules
// from: gRPC on EPHEMERA_ROUTES_LISTEN and the same answers as JSON over HTTP on
// EPHEMERA_ROUTES_HTTP_LISTEN. A watcher gets the current rules as ADDs, one SYNCED, then
// every change as it is folded into the sandbox projection. With the API's tokens
// configured, both ask every call for a bearer token of the viewer role or above.
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import * as pb from "@ephemera/proto";
import {
  PermissionDeniedError, UnauthenticatedError, errorMessage, grpc, startGrpcServer, unary, type Logger, type RunningServer, type ServerTls,
} from "@ephemera/kit";
import type { ApiAccess } from "../auth/access.js";
import { guard } from "../auth/guard.js";
import { ROUTES_POLICY } from "../auth/policy.js";
import { roleAllows } from "../auth/roles.js";
import { clusterServices, diff, matches, routingRules, type PlacedSandbox } from "./rules.js";
import type { RouteGroupRecord } from "../routegroup/state.js";


/** What the Routes API reads: the sandboxes with their forks' placements, the route groups, and word of every change to them. */
export interface RoutesSource {
  sandboxes(): Iterable<PlacedSandbox>;
  routeGroups(): Iterable<RouteGroupRecord>;
  onSandboxChange(listener: () => void): () => void;
}

export interface RoutesConfig {
  /** gRPC (EPHEMERA_ROUTES_LISTEN). */
  listen: string;
  /** HTTP (EPHEMERA_ROUTES_HTTP_LISTEN). */
  httpListen: string;
  /** The API's tokens and JWTs; absent: open, as the API is. */
  access?: ApiAccess;
  /** The API's certificate (EPHEMERA_TLS_CERT, …), for both; absent: plaintext. */
  tls?: ServerTls;
}

export interface RunningRoutes {
  port: number;
  httpPort: number;
  stop(): Promise<void>;
}

const rulesFor = (source: RoutesSource, req: pb.routes.WorkloadRoutingRulesRequest) =>
  routingRules(source.sandboxes(), source.routeGroups()).filter((r) => matches(r, req));

export function routesService(source: RoutesSource): pb.routes.RoutesServer {
  const rules = (req: pb.routes.WorkloadRoutingRulesRequest) => rulesFor(source, req);
  return {
    getWorkloadRoutingRules: unary(async (req: pb.routes.WorkloadRoutingRulesRequest) => ({ routingRules: rules(req) })),
    watchWorkloadRoutingRules: (call) => {
      let current = rules(call.request);
      for (const route of current) call.write({ op: pb.routes.WatchOp.ADD, route });
      call.write({ op: pb.routes.WatchOp.SYNCED });
      const stop = source.onSandboxChange(() => {
        const next = rules(call.request);
        for (const op of diff(current, next)) call.write(op);
        current = next;
      });
      call.on("cancelled", stop);
      call.on("close", stop);
    },
    getClusterServices: unary(async () => ({ services: clusterServices(source.sandboxes()) })),
  };
}

/** The HTTP form: GET /api/v1/workloads/routing-rules with the request's fields as query parameters, and GET /api/v1/cluster-services. */
function httpServer(source: RoutesSource, access: ApiAccess | undefined, tls: ServerTls | undefined, logger: Logger): Server {
  const serve = (req: IncomingMessage, reply: (code: number, body: unknown) => void) => {
    const url = new URL(req.url ?? "/", "http://routes");
    if (req.method !== "GET") return reply(405, { error: "only GET is served" });
    const q = (name: string) => url.searchParams.get(name) ?? "";
    if (url.pathname === "/api/v1/workloads/routing-rules") {
      const request = pb.routes.WorkloadRoutingRulesRequest.fromPartial({
        baselineWorkload: { kind: q("baselineKind"), namespace: q("baselineNamespace"), name: q("baselineName") },
        routingKey: q("routingKey"),
        destinationSandbox: { name: q("destinationSandboxName") },
      });
      return reply(200, pb.routes.GetWorkloadRoutingRulesResponse.toJSON({ routingRules: rulesFor(source, request) }));
    }
    if (url.pathname === "/api/v1/cluster-services") {
      return reply(200, pb.routes.GetClusterServicesResponse.toJSON({ services: clusterServices(source.sandboxes()) }));
    }
    return reply(404, { error: `no ${url.pathname}; the Routes API serves /api/v1/workloads/routing-rules and /api/v1/cluster-services` });
  };
  const listener: RequestListener = (req, res) => {
    const reply = replier(res);
    if (!access) return serve(req, reply);
    // Admitted before anything is read, unknown paths included: a refusal tells nothing about the API.
    admitHttp(access, req).then(
      () => serve(req, reply),
      (err: unknown) => {
        logger.info({ path: req.url, reason: errorMessage(err) }, "Routes API call refused");
        if (err instanceof PermissionDeniedError) return reply(403, { error: err.message });
        res.setHeader("WWW-Authenticate", 'Bearer realm="ephemera routes"');
        reply(401, { error: err instanceof UnauthenticatedError ? err.message : "cannot authenticate the call" });
      },
    );
  };
  if (!tls) return createServer(listener);
  const clientCerts = tls.clientCa ? { ca: tls.clientCa, requestCert: true, rejectUnauthorized: true } : {};
  return createHttpsServer({ cert: tls.cert, key: tls.key, ...clientCerts }, listener);
}

const replier = (res: ServerResponse) => (code: number, body: unknown) => {
  res.writeHead(code, { "Content-Type": "application/json" });
  res.end(JSON.stringify(body));
};

/** The HTTP request's `Authorization` header, checked as the gRPC calls' metadata is. */
async function admitHttp(access: ApiAccess, req: IncomingMessage): Promise<void> {
  const metadata = new grpc.Metadata();
  if (req.headers.authorization !== undefined) metadata.set("authorization", req.headers.authorization);
  const who = await access.authenticate(metadata);
  if (!roleAllows(who.role, "viewer")) throw new PermissionDeniedError(`role ${who.role} may not read the Routes API (it needs viewer)`);
}

export async function startRoutes(source: RoutesSource, config: RoutesConfig, logger: Logger): Promise<RunningRoutes> {
  const { listen, httpListen, access, tls } = config;
  const bindings = [{ definition: pb.routes.RoutesService, implementation: routesService(source) }];
  const grpcServer: RunningServer = await startGrpcServer(listen, access ? guard(bindings, access, logger, ROUTES_POLICY) : bindings, logger,
    tls ? { tls } : {});
  const http = httpServer(source, access, tls, logger);
  const [host, port] = splitHostPort(httpListen);
  await new Promise<void>((resolve, reject) => {
    http.once("error", reject);
    http.listen(port, host, () => resolve());
  });
  const httpPort = (http.address() as { port: number }).port;
  logger.info({ listen, port: grpcServer.port, httpPort, tokens: !!access, tls: !!tls }, "Routes API listening (gRPC and HTTP)");
  return {
    port: grpcServer.port,
    httpPort,
    stop: async () => {
      await new Promise<void>((resolve) => http.close(() => resolve()));
      await grpcServer.shutdown();
    },
  };
}

function splitHostPort(address: string): [string, number] {
  const i = address.lastIndexOf(":");
  return [address.slice(0, i).replace(/^\[|\]$/g, ""), Number(address.slice(i + 1))];
}
