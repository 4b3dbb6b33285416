// The preview gateway with real sockets: upstream HTTP servers stand for the endpoints'
// targets; requests go through the gateway by Host, as a browser's would.
import { createServer, request, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createLogger } from "@ephemera/kit";
import { apiAccess } from "../auth/access.js";
import { sha256 } from "../auth/tokens.js";
import { startGateway, type RunningGateway } from "./server.js";

const DOMAIN = "preview.test";
const KEY = "k1aaaaaaaaaa";
const logger = createLogger("test", "silent");

interface Seen { url: string; headers: IncomingHttpHeaders }

/** An upstream that answers what it saw, and echoes the bytes of an upgraded connection. */
async function upstream(): Promise<{ server: Server; port: number; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    seen.push({ url: req.url ?? "", headers: req.headers });
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ url: req.url, host: req.headers.host }));
  });
  server.on("upgrade", (req, socket) => {
    seen.push({ url: req.url ?? "", headers: req.headers });
    socket.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, port: (server.address() as AddressInfo).port, seen };
}

/** A request to the gateway with the given Host (and headers, body); its status, headers and body. */
function call(port: number, host: string, opts: { path?: string; method?: string; headers?: Record<string, string>; body?: string } = {}) {
  return new Promise<{ status: number; headers: IncomingHttpHeaders; body: string }>((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path: opts.path ?? "/", method: opts.method ?? "GET", headers: { host, ...opts.headers } }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end(opts.body);
  });
}

describe("the preview gateway", () => {
  let target: Awaited<ReturnType<typeof upstream>>;
  let gateway: RunningGateway;
  const sandboxes = [{ status: "active" as const, name: "feature-x", routingKey: KEY, endpoints: [] as { name: string; target: string; url: string; baselineUrl: string }[] }];
  const unreachable = { status: "active" as const, name: "broken", routingKey: "k3cccccccccc", endpoints: [
    { name: "web", target: "http://127.0.0.1:1", url: `https://web--k3cccccccccc.${DOMAIN}`, baselineUrl: `https://127-0-0-1-1.${DOMAIN}` },
  ] };

  beforeAll(async () => {
    target = await upstream();
    sandboxes[0]!.endpoints.push({
      name: "web", target: `http://localhost:${target.port}/app`, url: `https://web--${KEY}.${DOMAIN}`, baselineUrl: `https://localhost-${target.port}.${DOMAIN}`,
    });
    gateway = await startGateway({ sandboxes: () => [...sandboxes, unreachable] }, { listen: "127.0.0.1:0", domain: DOMAIN }, logger);
  });
  afterAll(async () => {
    await gateway?.stop();
    target?.server.close();
  });
  beforeEach(() => { target.seen.length = 0; });

  it("forwards an endpoint URL's request to its target with the routing key in all four headers, path and query kept", async () => {
    const res = await call(gateway.port, `web--${KEY}.${DOMAIN}`, { path: "/orders?id=7", headers: { baggage: "user=ann" } });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ url: "/app/orders?id=7", host: `localhost:${target.port}` });
    expect(target.seen[0]!.headers).toMatchObject({
      baggage: `user=ann,sd-routing-key=${KEY}`, tracestate: `sd-routing-key=${KEY}`,
      "ot-baggage-sd-routing-key": KEY, "uberctx-sd-routing-key": KEY, "x-forwarded-host": `web--${KEY}.${DOMAIN}`,
    });
  });

  it("forwards a baseline URL's request without any routing key, even one the client sent", async () => {
    const res = await call(gateway.port, `localhost-${target.port}.${DOMAIN}`, { headers: { baggage: `sd-routing-key=${KEY}`, "uberctx-sd-routing-key": KEY } });
    expect(res.status).toBe(200);
    const headers = target.seen[0]!.headers;
    expect([headers.baggage, headers["uberctx-sd-routing-key"], headers["ot-baggage-sd-routing-key"], headers.tracestate]).toEqual([undefined, undefined, undefined, undefined]);
  });

  it("answers 404 with one line for a host it does not serve, and forwards nothing", async () => {
    const res = await call(gateway.port, `web--zzzzzzzzzzzz.${DOMAIN}`);
    expect([res.status, res.body]).toEqual([404, "no endpoint web of a sandbox with routing key zzzzzzzzzzzz (deleted, or never made)\n"]);
    expect(target.seen).toEqual([]);
  });

  it("answers 502 with one line when the target cannot be reached", async () => {
    const res = await call(gateway.port, `web--k3cccccccccc.${DOMAIN}`);
    expect([res.status, res.body]).toEqual([502, "the endpoint's target http://127.0.0.1:1 cannot be reached: ECONNREFUSED\n"]);
  });

  it("forwards a WebSocket upgrade with the routing key, and the bytes both ways", async () => {
    const echoed = await new Promise<string>((resolve, reject) => {
      const req = request({ host: "127.0.0.1", port: gateway.port, path: "/ws", headers: {
        host: `web--${KEY}.${DOMAIN}`, connection: "Upgrade", upgrade: "websocket", "sec-websocket-version": "13", "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
      } });
      req.on("upgrade", (res, socket) => {
        expect(res.statusCode).toBe(101);
        socket.once("data", (d: Buffer) => { resolve(d.toString()); socket.destroy(); });
        socket.write("ping");
      });
      req.on("response", (res) => reject(new Error(`no upgrade: ${res.statusCode}`)));
      req.on("error", reject);
      req.end();
    });
    expect(echoed).toBe("ping");
    expect(target.seen[0]).toMatchObject({ url: "/app/ws", headers: { "uberctx-sd-routing-key": KEY } });
  });
});

describe("the preview gateway where the API asks for tokens", () => {
  const tokens = [
    { name: "ann", role: "viewer" as const, sha256: sha256("viewer-token") },
  ];
  let target: Awaited<ReturnType<typeof upstream>>;
  let gateway: RunningGateway;
  const host = `web--${KEY}.${DOMAIN}`;

  beforeAll(async () => {
    target = await upstream();
    const endpoints = [{ name: "web", target: `http://127.0.0.1:${target.port}`, url: `https://${host}`, baselineUrl: `https://x.${DOMAIN}` }];
    gateway = await startGateway({ sandboxes: () => [{ status: "active", name: "s", routingKey: KEY, endpoints }] },
      { listen: "127.0.0.1:0", domain: DOMAIN, access: apiAccess({ tokens })! }, logger);
  });
  afterAll(async () => {
    await gateway?.stop();
    target?.server.close();
  });

  it("refuses a request without a token: 401 with a Bearer challenge, or a browser sent to sign in", async () => {
    const api = await call(gateway.port, host);
    expect([api.status, api.headers["www-authenticate"]]).toEqual([401, 'Bearer realm="ephemera preview"']);
    expect(api.body).toBe("missing bearer token: send a viewer token in x-ephemera-token, or sign in at /.ephemera/login\n");
    const browser = await call(gateway.port, host, { path: "/page?a=1", headers: { accept: "text/html" } });
    expect([browser.status, browser.headers.location]).toEqual([303, "/.ephemera/login?next=%2Fpage%3Fa%3D1"]);
    expect(target.seen).toEqual([]);
  });

  it("signs a browser in with a cookie for the preview domain; the token never reaches the target", async () => {
    const form = await call(gateway.port, host, { path: "/.ephemera/login?next=/page" });
    expect([form.status, form.body]).toEqual([200, expect.stringContaining('<input type="password" name="token"')]);
    const wrong = await call(gateway.port, host, { path: "/.ephemera/login?next=/page", method: "POST", body: "token=nope",
      headers: { "content-type": "application/x-www-form-urlencoded" } });
    expect([wrong.status, wrong.body]).toEqual([401, expect.stringContaining("token not recognised")]);
    const signed = await call(gateway.port, host, { path: "/.ephemera/login?next=/page", method: "POST", body: "token=viewer-token",
      headers: { "content-type": "application/x-www-form-urlencoded" } });
    expect([signed.status, signed.headers.location]).toEqual([303, "/page"]);
    const cookie = signed.headers["set-cookie"]![0]!;
    expect(cookie).toBe(`ephemera_token=viewer-token; Domain=${DOMAIN}; Path=/; HttpOnly; SameSite=Lax`);
    const page = await call(gateway.port, host, { path: "/page", headers: { cookie: `theme=dark; ${cookie.split(";")[0]}` } });
    expect(page.status).toBe(200);
    const viaHeader = await call(gateway.port, host, { headers: { "x-ephemera-token": "viewer-token" } });
    expect(viaHeader.status).toBe(200);
    expect(target.seen.map((s) => [s.headers.cookie, s.headers["x-ephemera-token"]])).toEqual([["theme=dark", undefined], [undefined, undefined]]);
  });
});

describe("the preview gateway with the API's certificate", () => {
  it("serves TLS, and forwards to its target as over plain HTTP", async () => {
    const { makeCerts } = await import("../../../../test/support/certs.js");
    const { request: httpsRequest } = await import("node:https");
    const certs = makeCerts();
    const target = await upstream();
    const host = `web--${KEY}.${DOMAIN}`;
    const endpoints = [{ name: "web", target: `http://127.0.0.1:${target.port}`, url: `https://${host}`, baselineUrl: `https://x.${DOMAIN}` }];
    const gateway = await startGateway({ sandboxes: () => [{ status: "active", name: "s", routingKey: KEY, endpoints }] },
      { listen: "127.0.0.1:0", domain: DOMAIN, tls: certs.server() }, logger);
    try {
      const body = await new Promise<string>((resolve, reject) => {
        httpsRequest({ host: "127.0.0.1", port: gateway.port, path: "/", headers: { host }, ca: certs.client().ca, servername: "localhost" }, (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (d: string) => (text += d));
          res.on("end", () => resolve(`${res.statusCode} ${text}`));
        }).on("error", reject).end();
      });
      expect(body).toBe(`200 ${JSON.stringify({ url: "/", host: `127.0.0.1:${target.port}` })}`);
      expect(target.seen[0]!.headers["uberctx-sd-routing-key"]).toBe(KEY);
    } finally {
      await gateway.stop();
      target.server.close();
      certs.remove();
    }
  });
});
