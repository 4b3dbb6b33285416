import { routingKeyOf } from "./headers.js";

const KEY = "k3fd0c2a91b7";

describe("routingKeyOf", () => {
  it.each([
    ["baggage", { baggage: `sd-routing-key=${KEY}` }],
    ["ot-baggage-sd-routing-key", { "ot-baggage-sd-routing-key": KEY }],
    ["uberctx-sd-routing-key", { "uberctx-sd-routing-key": KEY }],
    ["tracestate", { tracestate: `sd-routing-key=${KEY}` }],
  ])("reads the key from %s alone", (_, headers) => {
    expect(routingKeyOf(headers)).toBe(KEY);
  });

  it("finds the key among other list members, with whitespace around them", () => {
    expect(routingKeyOf({ baggage: `userId=alice, sd-routing-key = ${KEY} ,isProduction=false` })).toBe(KEY);
    expect(routingKeyOf({ tracestate: `rojo=00f067aa0ba902b7,sd-routing-key=${KEY},congo=t61rcWkgMzE` })).toBe(KEY);
    expect(routingKeyOf({ "uberctx-sd-routing-key": `  ${KEY}\t` })).toBe(KEY);
  });

  it("drops a baggage member's properties and decodes its percent-encoding", () => {
    expect(routingKeyOf({ baggage: `sd-routing-key=${KEY};ttl=30` })).toBe(KEY);
    expect(routingKeyOf({ baggage: `sd-routing-key=%6b3fd0c2a91b7` })).toBe(KEY);
  });

  it("reads a header given as a list (HTTP/2) or repeated (joined by HTTP/1)", () => {
    expect(routingKeyOf({ baggage: ["a=1", `sd-routing-key=${KEY}`] })).toBe(KEY);
    expect(routingKeyOf({ tracestate: `a=1, sd-routing-key=${KEY}` })).toBe(KEY);
  });

  it("takes the first header holding a key, in the order baggage, ot-baggage, uberctx, tracestate", () => {
    const all = {
      baggage: "sd-routing-key=frombaggage",
      "ot-baggage-sd-routing-key": "fromot",
      "uberctx-sd-routing-key": "fromuber",
      tracestate: "sd-routing-key=fromtrace",
    };
    expect(routingKeyOf(all)).toBe("frombaggage");
    expect(routingKeyOf({ ...all, baggage: "other=1" })).toBe("fromot");
    expect(routingKeyOf({ ...all, baggage: undefined, "ot-baggage-sd-routing-key": undefined })).toBe("fromuber");
    expect(routingKeyOf({ tracestate: "sd-routing-key=fromtrace", baggage: "userId=alice" })).toBe("fromtrace");
  });

  it("passes over a value that is no routing key and tries the next header", () => {
    expect(routingKeyOf({ baggage: "sd-routing-key=Not-A-Key", "uberctx-sd-routing-key": KEY })).toBe(KEY);
    expect(routingKeyOf({ "ot-baggage-sd-routing-key": "", tracestate: `sd-routing-key=${KEY}` })).toBe(KEY);
    expect(routingKeyOf({ baggage: "sd-routing-key=" })).toBeUndefined();
    expect(routingKeyOf({ baggage: "sd-routing-key=%zz" })).toBeUndefined();
  });

  it("finds no key when none of the four headers holds one", () => {
    expect(routingKeyOf({})).toBeUndefined();
    expect(routingKeyOf({ host: "orders.shop.svc", "sd-routing-key": KEY, "x-routing-key": KEY })).toBeUndefined();
    expect(routingKeyOf({ baggage: `not-sd-routing-key=${KEY}`, tracestate: `sd-routing-keyx=${KEY}` })).toBeUndefined();
    expect(routingKeyOf({ baggage: KEY })).toBeUndefined();
  });
});
