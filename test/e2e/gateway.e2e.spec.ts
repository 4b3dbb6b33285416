// The preview gateway under `pnpm start` (the stack, process driver): a sandbox's endpoint
// URL reaches its target with the sandbox's routing key, its baseline URL without one, and
// once the sandbox is deleted its URL answers 404.
import { createServer, request, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { freePort, startTestStack, type TestStack } from "../support/stack.js";

const DOMAIN = "preview.ephemera.localhost";

function get(port: number, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    request({ host: "127.0.0.1", port, path: "/hello", headers: { host } }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    }).on("error", reject).end();
  });
}

describe("the preview gateway under pnpm start", () => {
  let stack: TestStack;
  let app: Server;
  let gatewayPort: number;
  const seen: IncomingHttpHeaders[] = [];

  beforeAll(async () => {
    app = createServer((req, res) => { seen.push(req.headers); res.end("from the app"); });
    await new Promise<void>((resolve) => app.listen(0, "127.0.0.1", resolve));
    gatewayPort = await freePort();
    stack = await startTestStack("gw", { EPHEMERA_GATEWAY_LISTEN: `127.0.0.1:${gatewayPort}` });
  }, 60_000);
  afterAll(async () => {
    await stack?.stop();
    app?.close();
  });

  it("serves a sandbox's endpoint URL with its routing key, the baseline URL without, and 404 once it is deleted", async () => {
    const ok = async (args: string[]) => {
      const r = await stack.eph(args);
      if (r.code !== 0) throw new Error(`eph ${args.join(" ")} exited ${r.code}: ${r.stderr}`);
      return r.stdout;
    };
    await ok(["plugin", "apply", "-f", stack.file("noop.yaml", "name: noop\nspec:\n  runner: {image: \"debian:bookworm-slim\"}\n  create:\n  - name: nothing\n    script: |\n      #!/bin/sh\n      true\n")]);
    const port = (app.address() as AddressInfo).port;
    await ok(["sandbox", "apply", "-f", stack.file("sb.yaml", `name: gw-sb
spec:
  cluster: local
  resources: [{name: res, plugin: noop}]
  defaultRouteGroup:
    endpoints: [{name: web, target: "http://127.0.0.1:${port}"}]
`)]);
    const view = JSON.parse(await ok(["sandbox", "get", "gw-sb", "-o", "json"])) as { routingKey: string; endpoints: { url: string; baselineUrl: string }[] };
    const host = new URL(view.endpoints[0]!.url).hostname;
    expect(host).toBe(`web--${view.routingKey}.${DOMAIN}`);

    expect(await get(gatewayPort, host)).toEqual({ status: 200, body: "from the app" });
    expect(seen.at(-1)).toMatchObject({ "uberctx-sd-routing-key": view.routingKey, baggage: `sd-routing-key=${view.routingKey}` });
    expect(await get(gatewayPort, new URL(view.endpoints[0]!.baselineUrl).hostname)).toEqual({ status: 200, body: "from the app" });
    expect(seen.at(-1)!["uberctx-sd-routing-key"]).toBeUndefined();

    await ok(["sandbox", "delete", "gw-sb"]);
    const gone = await get(gatewayPort, host);
    expect(gone.status).toBe(404);
    expect(gone.body).toContain(`routing key ${view.routingKey}`);
  }, 90_000);
});
