// The preview gateway (EPHEMERA_GATEWAY_LISTEN): serves sandboxes' endpoint URLs. A request
// whose Host is an endpoint URL's host goes to that endpoint's target with the sandbox's
// routing key in its headers (the routers at the destinations send it to the forks); a
// baseline URL's host goes to the target without a key; any other host gets 404 and one
// line saying why. WebSocket upgrades are forwarded alike. Where the API asks for tokens, so
// does the gateway (viewer or above): a browser signs in once at /.ephemera/login, which
// keeps the token in a cookie for the whole preview domain; other clients send it in
// X-Ephemera-Token. Neither reaches the target.
import { Agent, createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { Duplex } from "node:stream";
import { createProxyServer } from "http-proxy-3";
import { PermissionDeniedError, UnauthenticatedError, clusterLookup, errorMessage, grpc, type Logger, type ServerTls } from "@ephemera/kit";
import type { ApiAccess } from "../auth/access.js";
import { roleAllows } from "../auth/roles.js";
import type { SandboxRecord } from "../sandbox/state.js";
import { withRoutingKey } from "./headers.js";
import { requestHost, routeFor, targetUrl, type GatewayRoute } from "./hosts.js";
import { loginPage, TOKEN_COOKIE, TOKEN_HEADER, tokenCookie, withoutGatewayToken, gatewayToken } from "./login.js";

export interface GatewaySource {
  sandboxes(): Iterable<Pick<SandboxRecord, "status" | "name" | "routingKey" | "endpoints">>;
}

export interface GatewayConfig {
  /** EPHEMERA_GATEWAY_LISTEN. */
  listen: string;
  /** EPHEMERA_PREVIEW_DOMAIN: the endpoint URLs' domain. */
  domain: string;
  /** The API's tokens and JWTs; absent: open, as the API is. */
  access?: ApiAccess;
  /** The API's certificate; absent: plain HTTP. */
  tls?: ServerTls;
  /** EPHEMERA_GATEWAY_DNS: name servers for the targets' hosts (a cluster's DNS); absent: the machine's resolver. */
  dns?: string[];
}

export interface RunningGateway {
  port: number;
  stop(): Promise<void>;
}

export async function startGateway(source: GatewaySource, config: GatewayConfig, logger: Logger): Promise<RunningGateway> {
  const agent = new Agent({ keepAlive: true, ...(config.dns?.length ? { lookup: clusterLookup(config.dns) as never } : {}) });
  const proxy = createProxyServer({ agent, xfwd: true, changeOrigin: true, ws: true });
  proxy.on("error", (err, req, res) => {
    const target = (req as IncomingMessage & { gatewayTarget?: string }).gatewayTarget ?? "the target";
    const line = `the endpoint's target ${target} cannot be reached: ${(err as NodeJS.ErrnoException).code ?? errorMessage(err)}\n`;
    logger.warn({ target, err: errorMessage(err) }, "preview gateway: target unreachable");
    if ("writeHead" in res && !res.headersSent) {
      res.writeHead(502, { "Content-Type": "text/plain; charset=utf-8" });
      res.end(line);
    } else {
      (res as Duplex).destroy();
    }
  });

  const route = (req: IncomingMessage): GatewayRoute => routeFor(requestHost(req.headers.host), config.domain, source.sandboxes());
  const admit = async (headers: IncomingMessage["headers"]): Promise<void> => {
    if (!config.access) return;
    const token = gatewayToken(headers);
    const metadata = new grpc.Metadata();
    if (token !== undefined) metadata.set("authorization", `Bearer ${token}`);
    const who = await config.access.authenticate(metadata);
    if (!roleAllows(who.role, "viewer")) throw new PermissionDeniedError(`role ${who.role} may not open endpoints (it needs viewer)`);
  };
  const text = (res: ServerResponse, code: number, line: string, headers: Record<string, string> = {}) => {
    res.writeHead(code, { "Content-Type": "text/plain; charset=utf-8", ...headers });
    res.end(`${line}\n`);
  };
  /** The request forwarded to its endpoint's target, or answered here (404, 401, 403). */
  const forward = (req: IncomingMessage): { target: string } | { code: number; line: string } => {
    const r = route(req);
    if (r.kind === "unknown") return { code: 404, line: r.reason };
    let url: URL;
    try {
      url = targetUrl(r.target);
    } catch {
      return { code: 502, line: `the endpoint's target ${r.target} is not a URL` };
    }
    req.headers = withoutGatewayToken(withRoutingKey(req.headers, r.kind === "endpoint" ? r.routingKey : undefined)) as IncomingMessage["headers"];
    (req as IncomingMessage & { gatewayTarget?: string }).gatewayTarget = url.origin;
    return { target: url.origin + url.pathname.replace(/\/$/, "") };
  };

  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    if (new URL(req.url ?? "/", "http://gateway").pathname === "/.ephemera/login") return login(req, res);
    admit(req.headers).then(
      () => {
        const f = forward(req);
        if ("code" in f) return text(res, f.code, f.line);
        proxy.web(req, res, { target: f.target });
      },
      (err: unknown) => refuse(req, res, err),
    );
  };
  const refuse = (req: IncomingMessage, res: ServerResponse, err: unknown) => {
    logger.info({ host: req.headers.host, reason: errorMessage(err) }, "preview gateway: request refused");
    if (err instanceof PermissionDeniedError) return text(res, 403, err.message);
    // A browser is sent to sign in, and back.
    if ((req.headers.accept ?? "").includes("text/html") && req.method === "GET") {
      res.writeHead(303, { Location: `/.ephemera/login?next=${encodeURIComponent(req.url ?? "/")}` });
      return res.end();
    }
    text(res, 401, err instanceof UnauthenticatedError ? `${err.message}: send a viewer token in ${TOKEN_HEADER}, or sign in at /.ephemera/login` : "cannot authenticate the request",
      { "WWW-Authenticate": 'Bearer realm="ephemera preview"' });
  };
  const login = (req: IncomingMessage, res: ServerResponse) => {
    const next = new URL(req.url ?? "/", "http://gateway").searchParams.get("next") ?? "/";
    const safeNext = next.startsWith("/") && !next.startsWith("//") ? next : "/";
    if (req.method === "GET") {
      res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store" });
      return res.end(loginPage(safeNext, undefined));
    }
    if (req.method !== "POST") return text(res, 405, "sign in with GET (the form) or POST (token=...)");
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (d: string) => { body += d; if (body.length > 16_384) req.destroy(); });
    req.on("end", () => {
      const token = new URLSearchParams(body).get("token") ?? "";
      admit({ [TOKEN_HEADER]: token }).then(
        () => {
          res.writeHead(303, { Location: safeNext, "Set-Cookie": tokenCookie(token, config.domain, !!config.tls), "Cache-Control": "no-store" });
          res.end();
        },
        (err: unknown) => {
          res.writeHead(401, { "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store" });
          res.end(loginPage(safeNext, errorMessage(err)));
        },
      );
    });
  };
  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    admit(req.headers).then(
      () => {
        const f = forward(req);
        if ("code" in f) {
          socket.end(`HTTP/1.1 ${f.code} ${f.code === 404 ? "Not Found" : "Bad Gateway"}\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n${f.line}\n`);
          return;
        }
        proxy.ws(req, socket, head, { target: f.target });
      },
      (err: unknown) => {
        const code = err instanceof PermissionDeniedError ? "403 Forbidden" : "401 Unauthorized";
        socket.end(`HTTP/1.1 ${code}\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n${errorMessage(err)}\n`);
      },
    );
  };

  const server: Server = config.tls ? createHttpsServer({ cert: config.tls.cert, key: config.tls.key }, onRequest) : createServer(onRequest);
  server.on("upgrade", onUpgrade);
  const i = config.listen.lastIndexOf(":");
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(Number(config.listen.slice(i + 1)), config.listen.slice(0, i).replace(/^\[|\]$/g, ""), () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  logger.info({ listen: config.listen, port, domain: config.domain, tokens: !!config.access, tls: !!config.tls, dns: config.dns ?? "system" },
    "preview gateway listening");
  return {
    port,
    stop: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      proxy.close();
      agent.destroy();
    },
  };
}

export { TOKEN_COOKIE, TOKEN_HEADER };
