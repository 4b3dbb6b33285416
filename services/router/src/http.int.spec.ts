// ephemera-router on HTTP/1.1, over real sockets: a Routes API server, a baseline and a fork
// app, the router in between. Each request is routed by its own routing key, on one
// kept-alive connection too; headers reach the app untouched; a WebSocket upgrade is routed
// by key; a rule removed or a key unknown goes to the baseline.
import { Agent, request, type ClientRequest, type OutgoingHttpHeaders } from "node:http";
import { createServer } from "node:net";
import { waitFor } from "@ephemera/kit";
import WebSocket from "ws";
import type { Echo } from "./apps.testkit.js";
import { KEY, ORDERS, startHarness, type Harness } from "./harness.testkit.js";
import { routingRule } from "./routes-server.testkit.js";

let h: Harness;
let base: string;

beforeAll(async () => {
  h = await startHarness();
  base = `http://127.0.0.1:${h.listenerOf(h.baseline.httpPort)}`;
  await waitFor(() => h.router.table.ready, { what: "the first rules snapshot" });
});
afterAll(() => h?.stop());

interface Answer { status: number; body: string; echo?: Echo; req: ClientRequest }

function get(path: string, headers: OutgoingHttpHeaders = {}, agent: Agent | false = false, method = "GET", body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { method, headers, agent }, (res) => {
      let text = "";
      res.on("data", (chunk: Buffer) => (text += chunk.toString()));
      res.on("end", () => {
        const json = res.headers["content-type"] === "application/json" ? JSON.parse(text) as Echo : undefined;
        resolve({ status: res.statusCode ?? 0, body: text, ...(json ? { echo: json } : {}), req });
      });
    });
    req.on("error", reject);
    req.end(body);
  });
}

const keyed = { baggage: `userId=alice,sd-routing-key=${KEY}` };

describe("ephemera-router, HTTP/1.1", () => {
  it("routes each request on one kept-alive connection by its own key: keyed to the fork, the next to the baseline", async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const first = await get("/orders/1", keyed, agent);
      const second = await get("/orders/2", {}, agent);
      expect([first.echo?.app, second.echo?.app]).toEqual(["fork", "baseline"]);
      expect(first.req.reusedSocket).toBe(false);
      expect(second.req.reusedSocket).toBe(true);
      const third = await get("/orders/3", { tracestate: `sd-routing-key=${KEY}` }, agent);
      expect(third).toMatchObject({ echo: { app: "fork", url: "/orders/3" } });
      expect(third.req.reusedSocket).toBe(true);
    } finally {
      agent.destroy();
    }
  });

  it.each([
    ["baggage", { baggage: `sd-routing-key=${KEY}` }],
    ["ot-baggage-sd-routing-key", { "ot-baggage-sd-routing-key": KEY }],
    ["uberctx-sd-routing-key", { "uberctx-sd-routing-key": KEY }],
    ["tracestate", { tracestate: `congo=t61rcWkgMzE, sd-routing-key=${KEY}` }],
  ])("routes a key carried in %s to the fork", async (_, headers) => {
    expect((await get("/", headers)).echo?.app).toBe("fork");
  });

  it("passes the request on untouched: method, path, body, Host and the routing-key headers, no X-Forwarded-*", async () => {
    const answer = await get("/orders?id=7&x=%20y", { ...keyed, host: "orders.shop.svc:8080", "X-Custom-Case": ["one", "two"] }, false, "POST", "a body");
    expect(answer.echo).toMatchObject({ app: "fork", method: "POST", url: "/orders?id=7&x=%20y", body: "a body" });
    expect(answer.echo?.headers).toMatchObject({ host: "orders.shop.svc:8080", baggage: keyed.baggage });
    // Names' case and repeated headers as sent.
    expect(answer.echo?.rawHeaders.filter((_, i, raw) => raw[i - 1] === "X-Custom-Case")).toEqual(["one", "two"]);
    expect(Object.keys(answer.echo?.headers ?? {}).filter((k) => k.startsWith("x-forwarded") || k === "forwarded" || k === "via")).toEqual([]);
  });

  it("sends a request without a key, with an unknown key, or with a key of another workload to the baseline", async () => {
    expect((await get("/")).echo?.app).toBe("baseline");
    expect((await get("/", { baggage: "sd-routing-key=unknownkey01" })).echo?.app).toBe("baseline");
    expect((await get("/", { baggage: "sd-routing-key=othercart" })).echo?.app).toBe("baseline");
  });

  it("routes a WebSocket upgrade by its key, and the messages after it", async () => {
    const talk = (headers: Record<string, string>) => new Promise<string>((resolve, reject) => {
      const ws = new WebSocket(`ws://127.0.0.1:${h.listenerOf(h.baseline.httpPort)}/live`, { headers });
      ws.on("open", () => ws.send("hello"));
      ws.on("message", (data: Buffer) => {
        resolve(data.toString());
        ws.close();
      });
      ws.on("error", reject);
    });
    expect(await talk(keyed)).toBe("fork:hello");
    expect(await talk({})).toBe("baseline:hello");
    expect(h.fork.upgrades.at(-1)).toMatchObject({ baggage: keyed.baggage, upgrade: "websocket" });
  });

  it("answers 502 naming the destination when the fork cannot be reached", async () => {
    const closedPort = await closedPortOnLoopback();
    h.routes.set(routingRule(ORDERS, "gonefork0001", { [h.baseline.httpPort]: { host: "127.0.0.1", port: closedPort } }));
    await waitFor(() => h.router.table.forkFor("gonefork0001", h.baseline.httpPort), { what: "the rule of gonefork0001" });
    const answer = await get("/", { baggage: "sd-routing-key=gonefork0001" });
    expect(answer.status).toBe(502);
    expect(answer.body).toMatch(new RegExp(`^ephemera-router: cannot reach 127\\.0\\.0\\.1:${closedPort}: .*ECONNREFUSED`));
  });

  it("sends the key to the baseline once its rule is removed, and to the fork again once it is back", async () => {
    h.routes.remove(h.rule);
    await waitFor(async () => (await get("/", keyed)).echo?.app === "baseline", { what: "the keyed request on the baseline" });
    h.routes.set(h.rule);
    await waitFor(async () => (await get("/", keyed)).echo?.app === "fork", { what: "the keyed request on the fork" });
  });
});

async function closedPortOnLoopback(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
