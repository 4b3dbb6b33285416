import * as pb from "@ephemera/proto";
import { ev, type DomainEvent } from "@ephemera/events";
import { connectedLocals, foldLocalLinks, localStatus, noLocalLinks } from "./locals.js";

const fold = (events: Array<[DomainEvent, string]>) => events.reduce((s, [e, t]) => foldLocalLinks(s, e, t), noLocalLinks());
const connected = (session: string) => ev("ephemera.locals.connected.v1", {
  sandbox: "sb", routingKey: "rk1", local: "backend", sessionId: session, addresses: [{ port: 8080, address: "10.0.0.9:41000" }],
});
const disconnected = (session: string, reason: string) => ev("ephemera.locals.disconnected.v1", { sandbox: "sb", routingKey: "rk1", local: "backend", sessionId: session, reason });

describe("a sandbox's local workloads as the tunnel reports them", () => {
  it("is Disconnected, saying no workstation has connected, before any event", () => {
    expect(localStatus(fold([]).get("backend"))).toEqual({ status: "Disconnected", message: "no workstation has connected (eph local connect)" });
  });

  it("is Connected with its session and since when, then Disconnected with why and since when", () => {
    const on = fold([[connected("s1"), "2026-01-01T00:00:00Z"]]);
    expect(connectedLocals(on)).toEqual(new Set(["backend"]));
    expect(localStatus(on.get("backend"))).toEqual({ status: "Connected", message: "served by tunnel session s1 since 2026-01-01T00:00:00Z" });
    const off = foldLocalLinks(on, disconnected("s1", "lost"), "2026-01-01T00:01:00Z");
    expect(connectedLocals(off)).toEqual(new Set());
    expect(localStatus(off.get("backend"))).toEqual({ status: "Disconnected", message: "lost since 2026-01-01T00:01:00Z (session s1)" });
  });

  it("says why nothing routes to a connected local when the runner placed nothing for its session", () => {
    const on = fold([[connected("s2"), "t2"]]);
    const problem = "baseline Deployment shop/backend not found on cluster c1: no Service to route";
    const placed = (sessionId: string) => pb.LocalPlacement.fromPartial({ local: "backend", sessionId, problem });
    expect(localStatus(on.get("backend"), placed("s2"))).toEqual({ status: "Connected", message: `served by tunnel session s2 since t2, but ${problem}` });
    // What was placed for an earlier session says nothing of this one (the runner has not answered it yet).
    expect(localStatus(on.get("backend"), placed("s1"))).toEqual({ status: "Connected", message: "served by tunnel session s2 since t2" });
  });

  it("says the tunnel was lost when the health check disconnected it", () => {
    const off = fold([[connected("s1"), "t1"], [disconnected("s1", "tunnel-lost"), "2026-01-01T00:01:00Z"]]);
    expect(localStatus(off.get("backend"))).toEqual({
      status: "Disconnected", message: "tunnel lost (it stopped answering the health check) since 2026-01-01T00:01:00Z (session s1)",
    });
  });

  it("an old session's late disconnect leaves a newer session's connection alone", () => {
    const s = fold([[connected("s1"), "t1"], [connected("s2"), "t2"], [disconnected("s1", "lost"), "t3"]]);
    expect(s.get("backend")).toMatchObject({ kind: "connected", sessionId: "s2", since: "t2" });
  });
});
