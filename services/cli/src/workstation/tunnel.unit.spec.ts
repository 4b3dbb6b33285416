import { TunnelRefused } from "../../../tunnel/src/client.js";
import { isRefusal } from "./tunnel.js";

describe("which refusals of the tunnel end the daemon's reconnects", () => {
  it("a no that trying again cannot change ends them", () => {
    expect(isRefusal(new TunnelRefused(401, "no token"))).toBe(true);
    expect(isRefusal(new TunnelRefused(403, "editor may not serve sandbox x"))).toBe(true);
    expect(isRefusal(new TunnelRefused(404, "no sandbox x"))).toBe(true);
  });

  it("a tunnel stopping, or not able to open a session for now (503), is tried again, as is one not reached", () => {
    expect(isRefusal(new TunnelRefused(503, "the tunnel is stopping"))).toBe(false);
    expect(isRefusal(new TunnelRefused(503, "the session could not be opened: NATS unavailable"))).toBe(false);
    expect(isRefusal(Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:7785"), { code: "ECONNREFUSED" }))).toBe(false);
  });
});
