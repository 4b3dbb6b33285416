import { withRoutingKey } from "./headers.js";
import { requestHost, routeFor } from "./hosts.js";
import { gatewayToken, tokenCookie, withoutGatewayToken } from "./login.js";

const DOMAIN = "preview.example.com";
const endpoint = (name: string, key: string, target: string) => ({
  name, target, url: `https://${name}--${key}.${DOMAIN}`, baselineUrl: `https://frontend-demo-8080.${DOMAIN}`,
});
const sandboxes = [
  { status: "active" as const, name: "a", routingKey: "k1aaaaaaaaaa", endpoints: [endpoint("web", "k1aaaaaaaaaa", "http://frontend.demo.svc:8080")] },
  { status: "deleted" as const, name: "gone", routingKey: "k2bbbbbbbbbb", endpoints: [endpoint("web", "k2bbbbbbbbbb", "http://frontend.demo.svc:8080")] },
];

describe("the gateway's routes by Host", () => {
  it("sends an endpoint URL's host to its target with the sandbox's routing key", () => {
    expect(routeFor(`web--k1aaaaaaaaaa.${DOMAIN}`, DOMAIN, sandboxes)).toEqual({
      kind: "endpoint", target: "http://frontend.demo.svc:8080", routingKey: "k1aaaaaaaaaa", sandbox: "a", endpoint: "web",
    });
  });

  it("sends a baseline URL's host to the target without a key", () => {
    expect(routeFor(`frontend-demo-8080.${DOMAIN}`, DOMAIN, sandboxes)).toEqual({ kind: "baseline", target: "http://frontend.demo.svc:8080" });
  });

  it("knows no endpoint of a deleted sandbox, nor hosts outside the domain, and says why", () => {
    expect(routeFor(`web--k2bbbbbbbbbb.${DOMAIN}`, DOMAIN, sandboxes)).toEqual({
      kind: "unknown", reason: "no endpoint web of a sandbox with routing key k2bbbbbbbbbb (deleted, or never made)",
    });
    expect(routeFor("example.org", DOMAIN, sandboxes)).toEqual({ kind: "unknown", reason: `host example.org is not under the preview domain ${DOMAIN}` });
    expect(routeFor("", DOMAIN, sandboxes).kind).toBe("unknown");
  });

  it("reads the Host header without its port, in lower case", () => {
    expect(requestHost(`WEB--k1aaaaaaaaaa.${DOMAIN}:7780`)).toBe(`web--k1aaaaaaaaaa.${DOMAIN}`);
    expect(requestHost("[::1]:80")).toBe("[::1]");
  });
});

describe("the routing-key headers", () => {
  it("sets all four, keeping the other baggage and tracestate members, and replacing a key the client sent", () => {
    const out = withRoutingKey({ baggage: "user=1, sd-routing-key=forged", tracestate: "vendor=x", "ot-baggage-sd-routing-key": "forged", accept: "*/*" }, "k1");
    expect(out).toEqual({
      baggage: "user=1,sd-routing-key=k1", tracestate: "sd-routing-key=k1,vendor=x",
      "ot-baggage-sd-routing-key": "k1", "uberctx-sd-routing-key": "k1", accept: "*/*",
    });
  });

  it("removes every form of the key for a baseline URL", () => {
    expect(withRoutingKey({ baggage: "sd-routing-key=k1", tracestate: "sd-routing-key=k1", "uberctx-sd-routing-key": "k1", "x-other": "1" }, undefined))
      .toEqual({ "x-other": "1" });
  });
});

describe("the gateway's token", () => {
  it("is read from X-Ephemera-Token or the cookie, and removed before forwarding, other cookies kept", () => {
    expect(gatewayToken({ "x-ephemera-token": "t1", cookie: "ephemera_token=t2" })).toBe("t1");
    expect(gatewayToken({ cookie: "a=1; ephemera_token=t%2B2" })).toBe("t+2");
    expect(gatewayToken({})).toBeUndefined();
    expect(withoutGatewayToken({ "x-ephemera-token": "t1", cookie: "a=1; ephemera_token=t2; b=2" })).toEqual({ cookie: "a=1; b=2" });
  });

  it("is kept in an HttpOnly cookie for the whole preview domain, Secure over TLS", () => {
    expect(tokenCookie("t", DOMAIN, true)).toBe(`ephemera_token=t; Domain=${DOMAIN}; Path=/; HttpOnly; SameSite=Lax; Secure`);
    expect(tokenCookie("t", DOMAIN, false)).not.toContain("Secure");
  });
});
