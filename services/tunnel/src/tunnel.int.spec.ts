// The tunnel service end to end on real servers: the real API (LocalService.Serve over the
// sandbox core, with tokens), the tunnel on the shared NATS JetStream (every event asserted
// from the store), the client library, and TCP servers standing in for the workstation's
// local workload and for a cluster Service; kube-sim's Services for /v1/services.
import { connect as connect_ } from "node:net";
import { Aggregates } from "@ephemera/events";
import { waitFor } from "@ephemera/kit";
import { TOKENS, tokensAccess } from "../../../test/support/api-tokens.js";
import { makeCerts } from "../../../test/support/certs.js";
import { freePort } from "../../../test/support/stack.js";
import { TunnelClient, TunnelRefused, type ClosedEvent } from "./client.js";
import { apiAuthorizer, refuseOpenApiElsewhere, type Refusal } from "./server/authorize.js";
import { startCluster, type Cluster } from "./cluster.testkit.js";
import { echoServer, exchange, listenerPort, relay, startWorld, type TunnelWorld } from "./tunnel.testkit.js";

const { tunnel: TUNNEL, locals: LOCALS } = Aggregates;
const closedOnce = (client: TunnelClient) => {
  const seen: ClosedEvent[] = [];
  client.on("closed", (e: ClosedEvent) => seen.push(e));
  return seen;
};
/** The error code of a connection to `port` on loopback ("" when it connects). */
const dialError = (port: number) => new Promise<string>((resolve) => {
  const socket = connect_(port, "127.0.0.1");
  socket.once("connect", () => { socket.destroy(); resolve(""); });
  socket.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
});

describe("the tunnel with the API's tokens, over TLS", () => {
  const certs = makeCerts();
  let revoked = "";
  let world: TunnelWorld;
  let echo: Awaited<ReturnType<typeof echoServer>>;
  beforeAll(async () => {
    // A token that stops working: the real API is then asked without it.
    world = await startWorld({ access: tokensAccess(), tls: certs.server(),
      authorize: (real) => (token, sandboxes) => real(token === revoked ? undefined : token, sandboxes) });
    echo = await echoServer();
  });
  afterAll(async () => {
    await echo?.close();
    await world?.stop();
    certs.remove();
  });
  const connect = (token: string | undefined, sandboxes: string[]) => TunnelClient.connect({
    address: world.tunnel.address, tls: { ca: Buffer.from(certs.client().ca!) }, sandboxes, client: "eph/test host-a", ...(token ? { token } : {}),
  });
  const refusal = (p: Promise<unknown>) => p.then(() => undefined, (err: unknown) => err);

  it("with the API's tokens, serves an editor on any address: only an open API is kept to loopback", async () => {
    await world.sandboxWithLocal("tok-guard", "127.0.0.1:9");
    const api = apiAuthorizer(world.api, undefined);
    try {
      const served = await refuseOpenApiElsewhere(api.authorize, "10.1.2.3:7785", false)(TOKENS.editor, ["tok-guard"]);
      expect([served.open, served.served.map((l) => l.sandbox)]).toEqual([false, ["tok-guard"]]);
    } finally {
      api.close();
    }
  });

  it("refuses no token (401), a viewer (403), an unknown sandbox (404), each with the API's reason", async () => {
    await world.sandboxWithLocal("tok-a", `127.0.0.1:${echo.port}`);
    const none = await refusal(connect(undefined, ["tok-a"]));
    expect(none).toBeInstanceOf(TunnelRefused);
    expect([(none as TunnelRefused).status, (none as TunnelRefused).reason]).toEqual([401, "missing bearer token"]);
    const viewer = await refusal(connect(TOKENS.viewer, ["tok-a"])) as TunnelRefused;
    expect([viewer.status, viewer.reason]).toEqual([403, "role viewer may not call LocalService/Serve (it needs editor)"]);
    const unknown = await refusal(connect(TOKENS.editor, ["nope"])) as TunnelRefused;
    expect([unknown.status, unknown.reason]).toEqual([404, "sandbox nope not found"]);
  });

  it("serves an editor's local workload: the cluster's connection reaches the workstation's server and its answer comes back, all recorded", async () => {
    const routingKey = await world.sandboxWithLocal("tok-b", `127.0.0.1:${echo.port}`);
    const client = await connect(TOKENS.editor, ["tok-b"]);
    const closed = closedOnce(client);
    expect(client.subject).toBe("test-editor");
    expect(client.serving).toEqual([{ sandbox: "tok-b", routingKey, local: "backend", mappings: [{ port: 8080, toLocal: `127.0.0.1:${echo.port}` }], status: "Ready" }]);

    const opened = await world.waitForEvent(TUNNEL, client.sessionId, "ephemera.tunnel.session_opened.v1");
    expect(opened.data).toEqual({ sessionId: client.sessionId, subject: "test-editor", sandboxes: ["tok-b"], peer: expect.stringMatching(/^127\.0\.0\.1:\d+$/), client: "eph/test host-a", tunnel: "tunnel-test" });
    const connected = await world.waitForEvent(LOCALS, routingKey, "ephemera.locals.connected.v1", (d) => d["sessionId"] === client.sessionId);
    expect(connected.data).toEqual({ sandbox: "tok-b", routingKey, local: "backend", sessionId: client.sessionId, addresses: [{ port: 8080, address: expect.stringMatching(/^127\.0\.0\.1:\d+$/) }],
      tunnel: `https://${world.tunnel.address}` });

    const { socket, received } = await exchange(listenerPort(connected), "hello", "echo:hello");
    expect(received).toBe("echo:hello");
    socket.end();
    const conn = await world.waitForEvent(TUNNEL, client.sessionId, "ephemera.tunnel.connection_closed.v1");
    expect(conn.data).toEqual(expect.objectContaining({
      direction: "to_workstation", sandbox: "tok-b", local: "backend", target: `127.0.0.1:${echo.port}`, bytesToWorkstation: 5, bytesToCluster: 10,
    }));
    expect((conn.data as { error?: string }).error ?? "").toBe("");
    await waitFor(() => client.stats().connections === 1 && client.stats().open === 0);
    expect(client.stats()).toEqual({ open: 0, connections: 1, bytesToWorkstation: 5, bytesToCluster: 10 });

    await client.close();
    expect(closed).toEqual([{ reason: "disconnect" }]);
    const sessionClosed = await world.waitForEvent(TUNNEL, client.sessionId, "ephemera.tunnel.session_closed.v1");
    expect(sessionClosed.data).toEqual({ sessionId: client.sessionId, reason: "disconnect", connections: 1, bytesToWorkstation: 5, bytesToCluster: 10 });
    const gone = await world.waitForEvent(LOCALS, routingKey, "ephemera.locals.disconnected.v1", (d) => d["sessionId"] === client.sessionId);
    expect(gone.data).toEqual({ sandbox: "tok-b", routingKey, local: "backend", sessionId: client.sessionId, reason: "disconnect" });
    const metrics = await world.metrics.metrics();
    expect(metrics).toMatch(/ephemera_tunnel_bytes_total{direction="to_cluster"} 10/);
    expect(metrics).toMatch(/ephemera_tunnel_session_ends_total{reason="disconnect"} 1/);
  });

  it("records a connection the workstation cannot dial with the reason, and the cluster side is closed", async () => {
    const routingKey = await world.sandboxWithLocal("tok-c", "127.0.0.1:1");
    const client = await connect(TOKENS.editor, ["tok-c"]);
    const connected = await world.waitForEvent(LOCALS, routingKey, "ephemera.locals.connected.v1", (d) => d["sessionId"] === client.sessionId);
    const caller = connect_(listenerPort(connected));
    caller.on("error", () => undefined);
    caller.write("x");
    await new Promise((resolve) => caller.once("close", resolve));
    const conn = await world.waitForEvent(TUNNEL, client.sessionId, "ephemera.tunnel.connection_closed.v1");
    expect((conn.data as { error: string }).error).toBe("the workstation could not connect: cannot connect to 127.0.0.1:1: ECONNREFUSED");
    await client.close();
  });

  it("ends a session whose token stops working, on the next refresh, as revoked", async () => {
    const routingKey = await world.sandboxWithLocal("tok-d", `127.0.0.1:${echo.port}`);
    const client = await connect(TOKENS.editor, ["tok-d"]);
    const closed = closedOnce(client);
    await world.waitForEvent(LOCALS, routingKey, "ephemera.locals.connected.v1", (d) => d["sessionId"] === client.sessionId);
    revoked = TOKENS.editor;
    client.refresh();
    const sessionClosed = await world.waitForEvent(TUNNEL, client.sessionId, "ephemera.tunnel.session_closed.v1");
    expect((sessionClosed.data as { reason: string }).reason).toBe("revoked");
    await world.waitForEvent(LOCALS, routingKey, "ephemera.locals.disconnected.v1", (d) => d["sessionId"] === client.sessionId && d["reason"] === "revoked");
    await waitFor(() => closed.length === 1);
    expect(closed).toEqual([{ reason: "revoked" }]);
  });
});

describe("the tunnel's sessions and connections, on an open API", () => {
  let world: TunnelWorld;
  let echo: Awaited<ReturnType<typeof echoServer>>;
  beforeAll(async () => {
    world = await startWorld({ liveness: { intervalMs: 100, timeoutMs: 600 }, refreshMs: 200 });
    echo = await echoServer();
  });
  afterAll(async () => {
    await echo?.close();
    await world?.stop();
  });
  const connect = (options: { port?: number; sandboxes?: string[]; token?: string } = {}) => TunnelClient.connect({
    address: `127.0.0.1:${options.port ?? world.tunnel.port}`, sandboxes: options.sandboxes ?? [], ...(options.token ? { token: options.token } : {}),
    liveness: { intervalMs: 100, timeoutMs: 600 },
  });
  const connectedFor = (routingKey: string, client: TunnelClient) =>
    world.waitForEvent(LOCALS, routingKey, "ephemera.locals.connected.v1", (d) => d["sessionId"] === client.sessionId);

  it("a TLS client meeting this plaintext tunnel is told so in words, with the way out", async () => {
    const err = await TunnelClient.connect({ address: `127.0.0.1:${world.tunnel.port}`, tls: true, sandboxes: [] })
      .then(() => undefined, (e: unknown) => e as Error);
    expect(err?.message).toBe(`cannot reach the tunnel at 127.0.0.1:${world.tunnel.port} over TLS: it answers in plaintext `
      + "(a tunnel without EPHEMERA_TLS_CERT); give it a certificate, or connect with --insecure to send the token in plaintext");
  });

  it("on this open API serves only on loopback: elsewhere every session is refused (403) unless EPHEMERA_API_ALLOW_OPEN", async () => {
    await world.sandboxWithLocal("open-guard", "127.0.0.1:9");
    const api = apiAuthorizer(world.api, undefined);
    try {
      const refused = await refuseOpenApiElsewhere(api.authorize, "10.1.2.3:7785", false)(undefined, ["open-guard"])
        .then(() => undefined, (e: unknown) => e as Refusal);
      expect([refused?.status, refused?.message]).toEqual([403, "the tunnel on 10.1.2.3:7785 is open: no EPHEMERA_API_TOKENS or EPHEMERA_API_JWKS, "
        + "so anyone who reaches it may receive every sandbox's traffic for its local workloads and reach every cluster Service, from other "
        + "machines too. Set EPHEMERA_API_TOKENS or EPHEMERA_API_JWKS (docs/security.md), listen on loopback, or set EPHEMERA_API_ALLOW_OPEN=true"]);
      expect((await refuseOpenApiElsewhere(api.authorize, "10.1.2.3:7785", true)(undefined, ["open-guard"])).served).toHaveLength(1);
      expect((await refuseOpenApiElsewhere(api.authorize, "127.0.0.1:7785", false)(undefined, ["open-guard"])).served).toHaveLength(1);
    } finally {
      api.close();
    }
  });

  it("a tunnel that is not there is named with the connection's own error, not the cancelled stream's", async () => {
    const port = await freePort();
    const err = await TunnelClient.connect({ address: `127.0.0.1:${port}`, sandboxes: [] }).then(() => undefined, (e: unknown) => e as Error);
    expect(err?.message).toBe(`cannot reach the tunnel at 127.0.0.1:${port}: connect ECONNREFUSED 127.0.0.1:${port}`);
  });

  it("dials a cluster target for the workstation and records the bytes; an unreachable one is 502 with the reason", async () => {
    await world.sandboxWithLocal("open-a", `127.0.0.1:${echo.port}`);
    const service = await echoServer("svc:");
    const client = await connect({ sandboxes: ["open-a"] });
    const stream = await client.dial("127.0.0.1", service.port);
    const answer = new Promise<string>((resolve) => stream.on("data", (chunk: Buffer) => resolve(chunk.toString())));
    stream.write("ping");
    expect(await answer).toBe("svc:ping");
    stream.end();
    const conn = await world.waitForEvent(TUNNEL, client.sessionId, "ephemera.tunnel.connection_closed.v1");
    expect(conn.data).toEqual(expect.objectContaining({ direction: "to_cluster", target: `127.0.0.1:${service.port}`, bytesToCluster: 4, bytesToWorkstation: 8 }));
    const refused = await client.dial("127.0.0.1", 1).then(() => undefined, (err: unknown) => err) as TunnelRefused;
    expect([refused.status, refused.reason]).toEqual([502, "127.0.0.1:1 cannot be reached: ECONNREFUSED"]);
    const named = await client.dial("example.com.evil", 80).then(() => undefined, (err: unknown) => err) as TunnelRefused;
    expect(named.status).toBe(400);
    expect(await client.services()).toEqual([]);
    await client.close();
    await service.close();
  });

  it("a workstation that goes silent is lost within the liveness bound: its locals disconnected, its session closed as lost", async () => {
    const routingKey = await world.sandboxWithLocal("open-b", `127.0.0.1:${echo.port}`);
    const front = await relay(world.tunnel.port);
    const client = await connect({ port: front.port, sandboxes: ["open-b"] });
    await connectedFor(routingKey, client);
    const frozenAt = Date.now();
    front.freeze();
    await world.waitForEvent(LOCALS, routingKey, "ephemera.locals.disconnected.v1", (d) => d["sessionId"] === client.sessionId && d["reason"] === "lost", 5_000);
    expect(Date.now() - frozenAt).toBeLessThan(600 + 1_500);
    const closed = await world.waitForEvent(TUNNEL, client.sessionId, "ephemera.tunnel.session_closed.v1");
    expect((closed.data as { reason: string }).reason).toBe("lost");
    await front.close();
  });

  it("a session that ends with a connection open closes the cluster's socket, records the connection, and leaves nothing running", async () => {
    const routingKey = await world.sandboxWithLocal("open-c", `127.0.0.1:${echo.port}`);
    const front = await relay(world.tunnel.port);
    const client = await connect({ port: front.port, sandboxes: ["open-c"] });
    const closed = closedOnce(client);
    const connected = await connectedFor(routingKey, client);
    const { socket, received } = await exchange(listenerPort(connected), "abc", "echo:abc");
    expect(received).toBe("echo:abc");
    const socketClosed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
    socket.on("error", () => undefined);
    front.freeze(); // the workstation gone silent: its session is lost while the cluster's connection is open
    await socketClosed;
    const conn = await world.waitForEvent(TUNNEL, client.sessionId, "ephemera.tunnel.connection_closed.v1");
    expect(conn.data).toEqual(expect.objectContaining({ direction: "to_workstation", bytesToWorkstation: 3, bytesToCluster: 8, error: "the session ended (lost)" }));
    const sessionClosed = await world.waitForEvent(TUNNEL, client.sessionId, "ephemera.tunnel.session_closed.v1");
    expect(sessionClosed.data).toEqual(expect.objectContaining({ reason: "lost", connections: 1 }));
    await waitFor(() => closed.length === 1);
    expect(closed[0]!.reason).toBe("lost");
    // Nothing of the session is left in the tunnel: its connection closed by the tunnel (the frozen relay keeps
    // the workstation's side open) and the local's listener gone. These are the tunnel's own handles; the loop's
    // utilization or the process's CPU would also count whatever else shares the test process.
    expect(world.tunnel.server.sessions.has(client.sessionId)).toBe(false);
    await waitFor(() => front.open() === 0, { what: "the tunnel to close the lost session's connection" });
    await waitFor(() => dialError(listenerPort(connected)).then((code) => code === "ECONNREFUSED"), { what: "the local's listener to close" });
    expect(closed).toHaveLength(1);
    await front.close();
  });

  it("stops serving a sandbox that goes away (not-served), telling the workstation", async () => {
    const keyD = await world.sandboxWithLocal("open-d", `127.0.0.1:${echo.port}`);
    await world.sandboxWithLocal("open-e", `127.0.0.1:${echo.port}`);
    const client = await connect({ sandboxes: ["open-d", "open-e"] });
    const serving: string[][] = [];
    client.on("serving", (s: Array<{ sandbox: string }>) => serving.push(s.map((x) => x.sandbox)));
    await connectedFor(keyD, client);
    await world.core.deleteSandbox("open-d", true);
    const gone = await world.waitForEvent(LOCALS, keyD, "ephemera.locals.disconnected.v1", (d) => d["sessionId"] === client.sessionId);
    expect((gone.data as { reason: string }).reason).toBe("not-served");
    await waitFor(() => serving.length > 0);
    expect(serving[0]).toEqual(["open-e"]);
    await client.close();
  });

  it("ends every session as shutdown when the tunnel stops, each recorded, the client told once", async () => {
    const routingKey = await world.sandboxWithLocal("open-f", `127.0.0.1:${echo.port}`);
    const client = await connect({ sandboxes: ["open-f"] });
    const closed = closedOnce(client);
    await connectedFor(routingKey, client);
    await world.tunnel.stop();
    const sessionClosed = await world.waitForEvent(TUNNEL, client.sessionId, "ephemera.tunnel.session_closed.v1");
    expect((sessionClosed.data as { reason: string }).reason).toBe("shutdown");
    await world.waitForEvent(LOCALS, routingKey, "ephemera.locals.disconnected.v1", (d) => d["sessionId"] === client.sessionId && d["reason"] === "shutdown");
    await waitFor(() => closed.length === 1);
    expect(closed).toEqual([{ reason: "shutdown" }]);
  });
});

describe("the tunnel's /v1/services, listing a cluster through its kubeconfig", () => {
  let cluster: Cluster;
  let world: TunnelWorld;
  const listed: string[] = [];
  beforeAll(async () => {
    cluster = await startCluster("process");
    listed.push(await cluster.namespace("svc-a"), await cluster.namespace("svc-b"));
    world = await startWorld({ listServices: cluster.listServices(listed) });
  });
  afterAll(async () => {
    await world?.stop();
    await cluster?.stop();
  });

  it("lists the Services of the namespaces it is granted, sorted, with their ports; another namespace's are not listed", async () => {
    const [a, b] = listed as [string, string];
    const other = await cluster.namespace("svc-c");
    await cluster.service(a, "web", [80, 443]);
    await cluster.service(a, "api", [8080]);
    await cluster.service(b, "db", [5432], "127.0.0.1");
    await cluster.service(other, "hidden", [9000]);
    const client = await TunnelClient.connect({ address: world.tunnel.address });
    expect(await client.services()).toEqual([
      { namespace: a, name: "api", ports: [8080] },
      { namespace: a, name: "web", ports: [80, 443] },
      { namespace: b, name: "db", ports: [5432] },
    ]);
    await client.close();
  });

  it("answers 503 with the reason when the Kubernetes API cannot be asked", async () => {
    const client = await TunnelClient.connect({ address: world.tunnel.address });
    await cluster.stop();
    const refused = await client.services().then(() => undefined, (err: unknown) => err) as TunnelRefused;
    expect(refused).toBeInstanceOf(TunnelRefused);
    expect(refused.status).toBe(503);
    expect(refused.reason).toMatch(/^the cluster's Services cannot be listed now: .*ECONNREFUSED/);
    await client.close();
  });
});
