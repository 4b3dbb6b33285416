// The console's HTTP server: the JSON and SSE facade over the public API under /api (every
// call made with the browser's own token), /healthz, and the single-page app's files for
// every other path. Served over TLS when given a certificate, as the preview gateway is.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { CONSOLE_SERVER, errorMessage, isLoopback, openApiNotice, type Logger, type ServerTls } from "@ephemera/kit";
import { grpc, type ClientTls } from "@ephemera/kit/client";
import { TextDecoder } from "node:util";
import * as pb from "@ephemera/proto";
import { ConsoleApi } from "./api.js";
import { ConsoleRequestError, errorResponse, isApiCallError } from "./errors.js";
import { eventOf, inWindow, LastEvents, parseEventQuery, sinceMs } from "./events.js";
import { workflowGraph } from "./graph.js";
import { parseFilter, sandboxList } from "./sandboxes.js";
import { clearedCookie, hasCsrfHeader, requestToken, sessionCookie } from "./session.js";
import { openSse } from "./sse.js";
import { staticFiles } from "./static.js";
import { eventStream, logStream, sandboxListStream, sandboxStream, type StreamContext } from "./streams.js";


/** Every answer's headers: the page may load its own scripts and styles only. */
export const SECURITY_HEADERS: Record<string, string> = {
  "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "same-origin",
};

export interface ConsoleOptions {
  /** host:port to listen on (port 0: any free port). */
  listen: string;
  /** The public API's address. */
  api: string;
  /** Serve HTTPS with this certificate; absent: plain HTTP. */
  tls?: ServerTls;
  /** TLS to the API; absent: plaintext. */
  apiTls?: ClientTls;
  /** The built single-page app (index.html, assets/); default: this package's dist/web. */
  webRoot?: string;
  logger: Logger;
  /** EPHEMERA_API_ALLOW_OPEN: serve beyond loopback in front of an API that asks no token. */
  allowOpen?: boolean;
  /** How often each open list stream lists the sandboxes; default 1 s. */
  listPollMs?: number;
  /** Deadline of each unary API call; default 15 s. */
  apiTimeoutMs?: number;
  /** How often an open stream sends its `: ping` comment (proxies close idle connections); default 15 s. */
  pingMs?: number;
}

export interface RunningConsole {
  /** http(s)://host:port */
  address: string;
  port: number;
  /** What the console holds open for browsers now: upstream gRPC streams and list pollers. */
  open(): { upstream: number; poller: number };
  close(): Promise<void>;
}

const MAX_BODY = 16_384;

function readJson(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (d: string) => {
      body += d;
      if (body.length > MAX_BODY) reject(new ConsoleRequestError(413, "INVALID_ARGUMENT", `the request body is over ${MAX_BODY} bytes`));
    });
    req.on("end", () => {
      try {
        resolve(body ? JSON.parse(body) : {});
      } catch {
        reject(new ConsoleRequestError(400, "INVALID_ARGUMENT", "the request body is not JSON"));
      }
    });
    req.on("error", reject);
  });
}

/** Output values as the page shows them: UTF-8 text, or `base64:` and the bytes when they are not UTF-8. */
function valueText(value: Uint8Array): string {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(value);
  } catch {
    return `base64:${Buffer.from(value).toString("base64")}`;
  }
}

export async function startConsole(options: ConsoleOptions): Promise<RunningConsole> {
  const { logger } = options;
  const api = new ConsoleApi(options.api, { ...(options.apiTls ? { tls: options.apiTls } : {}), ...(options.apiTimeoutMs ? { timeoutMs: options.apiTimeoutMs } : {}) });
  const files = staticFiles(options.webRoot ?? (await import("./web-root.js")).defaultWebRoot());
  const secure = !!options.tls;
  /** Over TLS, or behind a proxy that ended TLS (an ingress): the cookie goes over HTTPS only. */
  const secureFor = (req: IncomingMessage) => secure || req.headers["x-forwarded-proto"] === "https";
  const pollMs = options.listPollMs ?? 1_000;
  const counts = { upstream: 0, poller: 0 };
  const track = (kind: "upstream" | "poller") => {
    counts[kind]++;
    let done = false;
    return () => { if (!done) { done = true; counts[kind]--; } };
  };

  /** An API without tokens is refused beyond loopback (as the API, the gateway and the tunnel refuse it), unless allowed. */
  const guardOpen = (who: pb.WhoAmIResponse) => {
    if (!who.open) return;
    try {
      openApiNotice(options.listen, { secured: false, allowOpen: options.allowOpen ?? false, server: CONSOLE_SERVER });
    } catch (err) {
      throw new ConsoleRequestError(403, "PERMISSION_DENIED", errorMessage(err));
    }
  };

  const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { ...SECURITY_HEADERS, "Content-Type": "application/json; charset=utf-8", "Cache-Control": "no-store", ...headers });
    res.end(JSON.stringify(body));
  };
  const fail = (req: IncomingMessage, res: ServerResponse, err: unknown) => {
    const { status, body } = errorResponse(err);
    if (status >= 500) logger.warn({ method: req.method, path: pathOf(req), status, code: body.code, err: isApiCallError(err) ? err.message : errorMessage(err) }, "console: request failed");
    if (res.headersSent) return void res.destroy();
    json(res, status, body);
  };
  const sse = (res: ServerResponse, token: string | undefined): StreamContext =>
    ({ api, token, sse: openSse(res, SECURITY_HEADERS, options.pingMs), logger, track });

  type Handler = (req: IncomingMessage, res: ServerResponse, params: string[], query: URLSearchParams, token: string | undefined) => Promise<void> | void;
  const routes: Array<[method: string, pattern: RegExp, handler: Handler]> = [
    ["POST", /^\/api\/login$/, async (req, res) => {
      const body = (await readJson(req)) as { token?: unknown };
      if (typeof body?.token !== "string") throw new ConsoleRequestError(400, "INVALID_ARGUMENT", "token: a string is required");
      const token = body.token.trim() || undefined;
      const who = await api.whoAmI(token);
      guardOpen(who);
      json(res, 200, pb.WhoAmIResponse.toJSON(who), { "Set-Cookie": token ? sessionCookie(token, secureFor(req)) : clearedCookie(secureFor(req)) });
    }],
    ["POST", /^\/api\/logout$/, (req, res) => {
      res.writeHead(204, { ...SECURITY_HEADERS, "Set-Cookie": clearedCookie(secureFor(req)), "Cache-Control": "no-store" });
      res.end();
    }],
    ["GET", /^\/api\/whoami$/, async (_req, res, _p, _q, token) => {
      const who = await api.whoAmI(token);
      guardOpen(who);
      json(res, 200, pb.WhoAmIResponse.toJSON(who));
    }],
    ["GET", /^\/api\/sandboxes$/, async (_req, res, _p, query, token) => {
      const filter = parseFilter(query);
      json(res, 200, sandboxList(await api.listSandboxes(token), filter));
    }],
    ["GET", /^\/api\/sandboxes\/stream$/, (_req, res, _p, query, token) => {
      const filter = parseFilter(query);
      sandboxListStream(sse(res, token), filter, pollMs);
    }],
    ["GET", /^\/api\/sandboxes\/([^/]+)$/, async (_req, res, [name], _q, token) => {
      json(res, 200, pb.SandboxView.toJSON(await api.getSandbox(token, name!)));
    }],
    ["GET", /^\/api\/sandboxes\/([^/]+)\/stream$/, (_req, res, [name], _q, token) => sandboxStream(sse(res, token), name!)],
    ["GET", /^\/api\/sandboxes\/([^/]+)\/outputs$/, async (_req, res, [name], _q, token) => {
      const view = await api.getSandbox(token, name!, true);
      const outputs = view.resources.flatMap((r) => r.outputs.map((o) => ({
        resource: r.name, key: o.key, size: o.size, value: o.value === undefined ? "" : valueText(o.value),
      })));
      json(res, 200, { outputs });
    }],
    ["DELETE", /^\/api\/sandboxes\/([^/]+)$/, async (_req, res, [name], _q, token) => {
      json(res, 200, pb.SandboxView.toJSON(await api.deleteSandbox(token, name!)));
    }],
    ["POST", /^\/api\/sandboxes\/([^/]+)\/retry$/, async (_req, res, [name], _q, token) => {
      json(res, 200, pb.RetrySandboxResponse.toJSON(await api.retrySandbox(token, name!)));
    }],
    ["GET", /^\/api\/sandboxes\/([^/]+)\/logs$/, (_req, res, [name], query, token) => {
      const attempt = Number(query.get("attempt") ?? "0");
      if (!Number.isInteger(attempt) || attempt < 0) throw new ConsoleRequestError(400, "INVALID_ARGUMENT", `attempt: "${query.get("attempt")}" is not a whole number`);
      const resource = query.get("resource") ?? "";
      if (!resource) throw new ConsoleRequestError(400, "INVALID_ARGUMENT", "resource: the resource whose logs to show is required");
      logStream(sse(res, token), pb.GetLogsRequest.fromPartial({
        sandbox: name!, resource, phase: query.get("phase") ?? "", step: query.get("step") ?? "", attempt,
        follow: ["1", "true"].includes(query.get("follow") ?? ""),
      }));
    }],
    ["GET", /^\/api\/plugins$/, async (_req, res, _p, _q, token) => {
      const byName = new Map<string, unknown[]>();
      for (const v of await api.listPlugins(token)) {
        const versions = byName.get(v.name) ?? [];
        versions.push(pb.ResourcePluginVersion.toJSON(v));
        byName.set(v.name, versions);
      }
      json(res, 200, { plugins: [...byName].map(([name, versions]) => ({ name, versions })) });
    }],
    ["GET", /^\/api\/plugins\/([^/]+)\/([^/]+)$/, async (_req, res, [name, version], _q, token) => {
      const plugin = await api.getPlugin(token, `${name}@${version}`);
      json(res, 200, {
        plugin: pb.ResourcePluginVersion.toJSON(plugin),
        graphs: { create: workflowGraph(plugin.spec?.create ?? []), delete: workflowGraph(plugin.spec?.delete ?? []) },
      });
    }],
    ["GET", /^\/api\/events$/, async (_req, res, _p, query, token) => {
      const q = parseEventQuery(query);
      const last = new LastEvents(q.limit);
      const upstream = api.watchEvents(token, { follow: false, sandbox: q.sandbox, typeGlob: q.type, sinceMs: sinceMs(q, Date.now()) }, (record) => {
        const event = eventOf(record);
        if (event && inWindow(event, q)) last.push(event);
      });
      // A browser that leaves before the replay ends stops it.
      res.on("close", () => upstream.cancel());
      if ((await upstream.done) === "cancelled") return;
      json(res, 200, { events: last.list() });
    }],
    ["GET", /^\/api\/events\/stream$/, (_req, res, _p, query, token) => eventStream(sse(res, token), parseEventQuery(query))],
    ["GET", /^\/api\/routegroups$/, async (_req, res, _p, _q, token) => json(res, 200, pb.ListRouteGroupsResponse.toJSON(await api.listRouteGroups(token)))],
    ["GET", /^\/api\/routegroups\/([^/]+)$/, async (_req, res, [name], _q, token) => json(res, 200, pb.RouteGroupView.toJSON(await api.getRouteGroup(token, name!)))],
    ["GET", /^\/api\/jobs$/, async (_req, res, _p, query, token) =>
      json(res, 200, pb.ListJobsResponse.toJSON(await api.listJobs(token, ["1", "true"].includes(query.get("all") ?? ""))))],
    ["GET", /^\/api\/jobs\/([^/]+)$/, async (_req, res, [name], _q, token) => json(res, 200, pb.JobView.toJSON(await api.getJob(token, name!)))],
    ["GET", /^\/api\/jobrunnergroups$/, async (_req, res, _p, _q, token) => json(res, 200, pb.ListJobRunnerGroupsResponse.toJSON(await api.listJobRunnerGroups(token)))],
  ];

  const onApi = async (req: IncomingMessage, res: ServerResponse, url: URL) => {
    const method = req.method === "HEAD" ? "GET" : req.method ?? "GET";
    const matching = routes.filter(([, pattern]) => pattern.test(url.pathname));
    if (!matching.length) throw new ConsoleRequestError(404, "NOT_FOUND", `no such console endpoint: ${url.pathname}`);
    const route = matching.find(([m]) => m === method);
    if (!route) throw new ConsoleRequestError(405, "UNIMPLEMENTED", `${url.pathname} takes ${matching.map(([m]) => m).join(" or ")}`);
    const [, pattern, handler] = route;
    if (method !== "GET" && url.pathname !== "/api/login" && !hasCsrfHeader(req.headers)) {
      throw new ConsoleRequestError(403, "PERMISSION_DENIED", "a change needs the X-Ephemera-Console: 1 header (sent by the console's page)");
    }
    let params: string[];
    try {
      params = pattern.exec(url.pathname)!.slice(1).map((p) => decodeURIComponent(p));
    } catch {
      throw new ConsoleRequestError(400, "INVALID_ARGUMENT", `${url.pathname}: not a valid path`);
    }
    await handler(req, res, params, url.searchParams, requestToken(req.headers));
  };

  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    const started = Date.now();
    // The path only: a token travels in a header, a cookie or the login's body, never in a URL.
    res.on("finish", () => logger.debug({ method: req.method, path: pathOf(req), status: res.statusCode, ms: Date.now() - started }, "console: request"));
    let url: URL;
    try {
      url = new URL(req.url ?? "/", "http://console");
    } catch {
      return fail(req, res, new ConsoleRequestError(400, "INVALID_ARGUMENT", "not a valid request path"));
    }
    if (url.pathname === "/healthz") {
      res.writeHead(200, { ...SECURITY_HEADERS, "Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-store" });
      return void res.end("ok");
    }
    if (url.pathname === "/api" || url.pathname.startsWith("/api/")) {
      return void onApi(req, res, url).catch((err: unknown) => fail(req, res, err));
    }
    if (req.method !== "GET" && req.method !== "HEAD") return fail(req, res, new ConsoleRequestError(405, "UNIMPLEMENTED", "the console's pages are read with GET"));
    // The raw path: the URL parser would resolve "/assets/../x" before the traversal check.
    const raw = (req.url ?? "/").split("?")[0]!;
    files.serve(req, res, raw.startsWith("/") ? raw : `/${raw}`, SECURITY_HEADERS).catch((err: unknown) => fail(req, res, err));
  };

  const server: Server = options.tls ? createHttpsServer({ cert: options.tls.cert, key: options.tls.key }, onRequest) : createServer(onRequest);
  try {
    await refuseOpenElsewhere(api, options, logger);
    const i = options.listen.lastIndexOf(":");
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(Number(options.listen.slice(i + 1)), options.listen.slice(0, i).replace(/^\[|\]$/g, ""), () => resolve());
    });
  } catch (err) {
    api.close();
    throw err;
  }
  const port = (server.address() as { port: number }).port;
  const host = options.listen.slice(0, options.listen.lastIndexOf(":"));
  const address = `${secure ? "https" : "http"}://${host === "0.0.0.0" || host === "" ? "127.0.0.1" : host}:${port}`;
  logger.info({ listen: options.listen, port, api: options.api, tls: secure, apiTls: !!options.apiTls }, "console listening");
  return {
    address,
    port,
    open: () => ({ ...counts }),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      api.close();
    },
  };
}

const pathOf = (req: IncomingMessage) => (req.url ?? "/").split("?")[0];

/**
 * Beyond loopback the console first asks the API whether it wants tokens (waiting for it to
 * answer): without them anyone reaching the console could delete every sandbox, which is
 * refused unless allowed. On loopback an open API is said once, as the API says it.
 */
async function refuseOpenElsewhere(api: ConsoleApi, options: ConsoleOptions, logger: Logger): Promise<void> {
  const ask = async (): Promise<boolean> => {
    try {
      return (await api.whoAmI(undefined)).open;
    } catch (err) {
      if (isApiCallError(err) && (err.code === grpc.status.UNAUTHENTICATED || err.code === grpc.status.PERMISSION_DENIED)) return false;
      throw err;
    }
  };
  if (isLoopback(options.listen)) {
    ask().then((open) => {
      const line = open ? openApiNotice(options.listen, { secured: false, server: CONSOLE_SERVER }) : undefined;
      if (line) logger.info(line);
    }, () => undefined);
    return;
  }
  let delayMs = 250;
  for (;;) {
    try {
      const open = await ask();
      const line = open ? openApiNotice(options.listen, { secured: false, allowOpen: options.allowOpen ?? false, server: CONSOLE_SERVER }) : undefined;
      if (line) logger.warn(line);
      return;
    } catch (err) {
      if (!isApiCallError(err)) throw err;
      logger.warn({ api: options.api, err: err.message }, "console: waiting for the API to say whether it asks for tokens");
      await new Promise((r) => setTimeout(r, delayMs));
      delayMs = Math.min(delayMs * 2, 5_000);
    }
  }
}
