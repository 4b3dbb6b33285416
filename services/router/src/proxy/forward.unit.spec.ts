import { endToEnd } from "./forward.js";

describe("endToEnd", () => {
  it("keeps every end-to-end header as it came: names' case, order and repeats", () => {
    const raw = ["Host", "orders.shop.svc", "X-Custom", "a", "baggage", "sd-routing-key=k1", "X-Custom", "b", "Content-Length", "3"];
    expect(endToEnd(raw)).toEqual(raw);
  });

  it("drops the hop-by-hop headers and those Connection names", () => {
    const raw = [
      "Host", "h", "Connection", "keep-alive, X-Hop, Upgrade", "Keep-Alive", "timeout=5", "Transfer-Encoding", "chunked",
      "TE", "trailers", "Proxy-Connection", "keep-alive", "Upgrade", "websocket", "x-hop", "1", "Trailer", "Expires", "Accept", "*/*",
    ];
    expect(endToEnd(raw)).toEqual(["Host", "h", "Trailer", "Expires", "Accept", "*/*"]);
  });
});
