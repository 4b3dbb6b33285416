// The cluster's health check of the tunnel, `GET /v1/sessions/<id>`, over TLS as the sandbox
// service asks it (services/sandbox/src/locals/probe.ts): open while the session is, 404 after
// and for an id never opened; asking touches no workstation and writes no event.
import { Aggregates } from "@ephemera/events";
import { makeCerts } from "../../../test/support/certs.js";
import { askTunnel } from "../../sandbox/src/locals/probe.js";
import { TunnelClient } from "./client.js";
import { checkUrl } from "./start.js";
import { echoServer, startWorld, type TunnelWorld } from "./tunnel.testkit.js";

describe("the tunnel's answer whether a session is open", () => {
  const certs = makeCerts();
  let world: TunnelWorld;
  let echo: Awaited<ReturnType<typeof echoServer>>;
  beforeAll(async () => {
    world = await startWorld({ tls: certs.server() });
    echo = await echoServer();
  });
  afterAll(async () => {
    await echo?.close();
    await world?.stop();
    certs.remove();
  });

  it("says open while the session is, and 404 once it ended or for an id it never had, with no event and no stream to the workstation", async () => {
    const routingKey = await world.sandboxWithLocal("alive", `127.0.0.1:${echo.port}`);
    const client = await TunnelClient.connect({ address: world.tunnel.address, tls: { ca: Buffer.from(certs.client().ca!) }, sandboxes: ["alive"] });
    const connected = await world.waitForEvent(Aggregates.locals, routingKey, "ephemera.locals.connected.v1", (d) => d["sessionId"] === client.sessionId);
    const url = (connected.data as { tunnel: string }).tunnel;
    expect(url).toBe(checkUrl("127.0.0.1", world.tunnel.port, true));

    for (let i = 0; i < 3; i++) expect(await askTunnel(url, [client.sessionId, "01never"], 2_000)).toEqual(new Map([[client.sessionId, "open"], ["01never", "gone"]]));
    expect((await world.events(Aggregates.tunnel, client.sessionId)).map((e) => e.type)).toEqual(["ephemera.tunnel.session_opened.v1"]);
    expect(client.stats()).toMatchObject({ connections: 0 });

    await client.close();
    await world.waitForEvent(Aggregates.tunnel, client.sessionId, "ephemera.tunnel.session_closed.v1");
    expect(await askTunnel(url, [client.sessionId], 2_000)).toEqual(new Map([[client.sessionId, "gone"]]));
  });

  it("is unreachable, for each session asked, where nothing listens", async () => {
    expect(await askTunnel("http://127.0.0.1:1", ["a", "b"], 500)).toEqual(new Map([["a", "unreachable"], ["b", "unreachable"]]));
  });

  it("formats the URL of an IPv6 pod address with brackets", () => {
    expect(checkUrl("fd00::7", 7785, false)).toBe("http://[fd00::7]:7785");
  });
});
