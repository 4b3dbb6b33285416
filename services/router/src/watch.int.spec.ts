// ephemera-router and the Routes API coming and going: not ready until the first rules
// arrive (the API down at start, then up), the last rules served while the watch is cut,
// the new ones once it is back; the viewer token sent with every watch.
import { request } from "node:http";
import { waitFor } from "@ephemera/kit";
import { freePort } from "../../../test/support/stack.js";
import { startApp, type App } from "./apps.testkit.js";
import { FAST_BACKOFF, forkRule, KEY, listenerOf, logger, routerConfig, TOKEN } from "./harness.testkit.js";
import { startRouter, type RunningRouter } from "./router.js";
import { TestRoutesServer } from "./routes-server.testkit.js";

let baseline: App;
let fork: App;
let router: RunningRouter;
let routes: TestRoutesServer | undefined;
let routesPort: number;

beforeAll(async () => {
  [baseline, fork] = await Promise.all([startApp("baseline"), startApp("fork")]);
  routesPort = await freePort();
  router = await startRouter(routerConfig(baseline, `127.0.0.1:${routesPort}`), logger, { listenHost: "127.0.0.1", backoff: FAST_BACKOFF });
});
afterAll(async () => {
  await router?.stop();
  routes?.stop();
  await Promise.all([baseline?.close(), fork?.close()]);
});

const health = async () => {
  const res = await fetch(`http://127.0.0.1:${router.healthPort}/healthz`);
  return { status: res.status, body: await res.json() as Record<string, unknown> };
};

/** Which app answered a GET with `key` (none: no routing-key header). */
const served = (key?: string) => new Promise<string>((resolve, reject) => {
  const headers = key ? { baggage: `sd-routing-key=${key}` } : {};
  request({ host: "127.0.0.1", port: listenerOf(router, baseline.httpPort), headers, agent: false }, (res) => {
    let body = "";
    res.on("data", (c: Buffer) => (body += c.toString()));
    res.on("end", () => resolve((JSON.parse(body) as { app: string }).app));
  }).on("error", reject).end();
});

describe("ephemera-router following the Routes API", () => {
  it("is not ready while the Routes API is down at start, and routes everything to the baseline", async () => {
    expect(await health()).toEqual({
      status: 503, body: { ready: false, watching: false, rules: 0, reason: "waiting for the first routing rules from the Routes API" },
    });
    expect(await served(KEY)).toBe("baseline");
  });

  it("gets the rules once the Routes API is up, sending the viewer token, and is ready", async () => {
    routes = await TestRoutesServer.start(routesPort, [forkRule(baseline, fork)]);
    await waitFor(async () => (await health()).status === 200, { what: "the router ready", timeoutMs: 10_000 });
    expect(await health()).toEqual({ status: 200, body: { ready: true, watching: true, rules: 1 } });
    expect(await served(KEY)).toBe("fork");
    expect(await served()).toBe("baseline");
    expect(routes.authorizations).toContain(`Bearer ${TOKEN}`);
    expect(new Set(routes.authorizations)).toEqual(new Set([`Bearer ${TOKEN}`]));
  });

  it("serves the last rules while the watch is cut, and stays ready", async () => {
    routes!.stop();
    await waitFor(async () => (await health()).body["watching"] === false, { what: "the watch seen cut" });
    expect(await health()).toMatchObject({ status: 200, body: { ready: true, rules: 1 } });
    expect(await served(KEY)).toBe("fork");
  });

  it("takes the Routes API's rules as they are once the watch is back: a rule gone while cut no longer routes", async () => {
    const other = "k9other00001";
    routes = await TestRoutesServer.start(routesPort, [forkRule(baseline, fork, other)]);
    await waitFor(async () => (await served(other)) === "fork", { what: "the new rule", timeoutMs: 10_000 });
    expect(await served(KEY)).toBe("baseline");
    expect(router.table.keys).toEqual([other]);
    expect(await health()).toEqual({ status: 200, body: { ready: true, watching: true, rules: 1 } });
  });
});
