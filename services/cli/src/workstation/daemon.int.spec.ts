// `eph local connect`'s daemon (runDaemon with the real tunnel client) against the real tunnel
// service, the real API over the sandbox core and the shared NATS JetStream under a fresh
// prefix (tunnel.testkit.ts): its state file through connect, a session lost when the tunnel
// stops, reconnect attempts with jittered backoff while it is down, the reconnect once it runs
// again on its port, and stop; refusals that end it; one daemon per state dir (the second
// one the built eph); and the host entries of a kube-sim's Services, whose listeners reach a
// server on this machine through the tunnel's dial and kube-sim's cluster DNS.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Aggregates } from "@ephemera/events";
import { waitFor } from "@ephemera/kit";
import { TOKENS, tokensAccess } from "../../../../test/support/api-tokens.js";
import { startCluster, type Cluster } from "../../../tunnel/src/cluster.testkit.js";
import { echoServer, startWorld, type TunnelWorld } from "../../../tunnel/src/tunnel.testkit.js";
import { ControlRefused, askEnvironment, controlPath } from "./control.js";
import { runDaemon, type DaemonOptions } from "./daemon.js";
import { openTunnel } from "./open.js";
import { alive, readState, type DaemonState } from "./state.js";
import { describeWithDocker } from "../../../../test/support/docker.js";

const MAIN = join(__dirname, "..", "..", "dist", "bundle", "main.js");
const BACKOFF = { initialDelay: 10, maxDelay: 50 };
const { tunnel: TUNNEL, locals: LOCALS } = Aggregates;

let home: string;
const dir = () => join(home, "local");
const state = () => readState(dir());
/** What a test started and did not end (a test that failed half-way): ended after it. */
const leftovers: Array<() => Promise<void>> = [];
beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), "eph-daemon-"));
});
afterEach(async () => {
  for (const end of leftovers.splice(0)) await end();
  rmSync(home, { recursive: true, force: true });
});

/** The daemon with the real client; `stop` ends it as SIGTERM would, `lines` is what it logged. */
function daemon(options: Partial<DaemonOptions> & Pick<DaemonOptions, "session">) {
  const controller = new AbortController();
  const lines: string[] = [];
  const told: Array<{ state: DaemonState } | { error: string }> = [];
  const running = runDaemon({
    dir: dir(), open: openTunnel, signal: controller.signal, backoff: BACKOFF, log: (l) => lines.push(l), ready: (o) => told.push(o), ...options,
  });
  leftovers.push(async () => {
    controller.abort();
    await running.catch(() => undefined);
  });
  return { running, lines, told, stop: async () => { controller.abort(); await running; } };
}

/** `text` to `host:port`, and what came back once it holds `until`. */
const exchange = (host: string, port: number, text: string, until: string) => new Promise<string>((resolve, reject) => {
  let got = "";
  const socket = connect(port, host, () => socket.write(text));
  socket.on("data", (c: Buffer) => {
    got += c.toString();
    if (got.includes(until)) {
      socket.end();
      resolve(got);
    }
  }).on("error", reject);
});

describe("the daemon on the tunnel and the API with tokens", () => {
  let world: TunnelWorld;
  let echo: Awaited<ReturnType<typeof echoServer>>;
  beforeAll(async () => {
    world = await startWorld({ access: tokensAccess(), refreshMs: 200 });
    echo = await echoServer();
  });
  // A test that failed with the tunnel stopped leaves the next one a tunnel.
  afterEach(async () => {
    if (!world.tunnel.server.server.listening) await world.reopenTunnel();
  });
  afterAll(async () => {
    await echo?.close();
    await world?.stop();
  });
  const session = (sandbox: string, token: string = TOKENS.editor) => ({ address: world.tunnel.address, token, sandboxes: [sandbox] });

  it("keeps its state through connect, a session lost when the tunnel stops, reconnect attempts while it is down, the reconnect; stops cleanly", async () => {
    const routingKey = await world.sandboxWithLocal("dm-a", `127.0.0.1:${echo.port}`);
    const d = daemon({ session: session("dm-a"), httpProxy: "127.0.0.1:0" });
    await waitFor(() => d.told[0], { what: "the daemon to connect" });
    const serving = [{ sandbox: "dm-a", routingKey, local: "backend", mappings: [{ port: 8080, toLocal: `127.0.0.1:${echo.port}` }], status: "Ready" }];
    expect(d.told).toEqual([{ state: expect.objectContaining({ phase: "connected", serving }) }]);
    const first = state()!;
    expect(first).toMatchObject({ pid: process.pid, tunnel: world.tunnel.address, phase: "connected", serving, proxies: { http: expect.stringMatching(/^127\.0\.0\.1:\d+$/) } });
    expect(world.tunnel.server.sessions.has(first.sessionId!)).toBe(true);
    await world.waitForEvent(LOCALS, routingKey, "ephemera.locals.connected.v1", (e) => e["sessionId"] === first.sessionId);

    // The tunnel goes away: the session ends as shutdown, and each reconnect is refused until it is back.
    await world.tunnel.stop();
    const down = await waitFor(() => {
      const s = state();
      return s?.phase === "reconnecting" && (s.attempt ?? 0) >= 3 ? s : undefined;
    }, { what: "three reconnect attempts" });
    expect(down.lastError).toMatch(new RegExp(`^cannot reach the tunnel at ${world.tunnel.address}: .*connect ECONNREFUSED`));
    expect(d.lines).toContain("reconnecting: shutdown");
    await world.reopenTunnel();
    const back = await waitFor(() => {
      const s = state();
      return s?.phase === "connected" && s.sessionId !== first.sessionId ? s : undefined;
    }, { what: "the reconnect" });
    expect(back).toMatchObject({ pid: process.pid, serving, proxies: first.proxies });
    expect(back.attempt).toBeUndefined();
    expect(back.lastError).toBeUndefined();
    expect(world.tunnel.server.sessions.has(back.sessionId!)).toBe(true);

    // Each failed attempt is counted in turn, its delay jittered within the bounds. (The first may
    // reach the tunnel while it stops, and be refused by it rather than by the closed port.)
    const attempts = d.lines.filter((l) => l.startsWith("reconnect attempt")).map((l) => {
      const m = /^reconnect attempt (\d+) failed: cannot reach the tunnel at \S+: (.+); next in (\d+) ms$/.exec(l);
      if (!m) throw new Error(`not a failed attempt: ${l}`);
      return { attempt: Number(m[1]), why: m[2]!, delay: Number(m[3]) };
    });
    expect(attempts.length).toBeGreaterThanOrEqual(3);
    expect(attempts.map((a) => a.attempt)).toEqual(attempts.map((_, i) => i + 1));
    expect(attempts.at(-1)!.why).toMatch(/connect ECONNREFUSED/);
    for (const { delay } of attempts) expect(delay).toBeLessThanOrEqual(BACKOFF.maxDelay);

    await d.stop();
    expect(state()).toBeUndefined();
    expect(existsSync(join(dir(), "daemon.lock"))).toBe(false);
    // Its bye ended the session as a disconnect, recorded by the tunnel.
    const closed = await world.waitForEvent(TUNNEL, back.sessionId!, "ephemera.tunnel.session_closed.v1");
    expect((closed.data as { reason: string }).reason).toBe("disconnect");
  });

  it("a refusal on reconnect ends the daemon with the tunnel's reason, its state saying so", async () => {
    await world.sandboxWithLocal("dm-b", `127.0.0.1:${echo.port}`);
    const d = daemon({ session: session("dm-b") });
    await waitFor(() => state()?.phase === "connected", { what: "the daemon to connect" });
    expect(state()!.serving.map((s) => s.sandbox)).toEqual(["dm-b"]);
    // The sandbox goes away: the tunnel's refresh tells the daemon, whose state follows.
    await world.core.deleteSandbox("dm-b", true);
    await waitFor(() => state()?.serving.length === 0, { what: "the new serving list in the state" });
    expect(d.lines).toContain("serving no local workloads");
    // The next session is refused: the sandbox is not found.
    await world.reopenTunnel();
    const refusal = "the tunnel refused (404): sandbox dm-b not found";
    await expect(d.running).rejects.toThrow(refusal);
    expect(state()).toMatchObject({ phase: "failed", lastError: refusal });
    expect(d.lines).toContain(`failed: ${refusal}`);
    expect(existsSync(join(dir(), "daemon.lock"))).toBe(false);
  });

  it("a refusal at connect (a viewer's token, 403) ends the daemon at once, its state and its caller saying why", async () => {
    await world.sandboxWithLocal("dm-c", `127.0.0.1:${echo.port}`);
    const d = daemon({ session: session("dm-c", TOKENS.viewer), httpProxy: "127.0.0.1:0" });
    const refusal = "the tunnel refused (403): role viewer may not call LocalService/Serve (it needs editor)";
    await expect(d.running).rejects.toThrow(refusal);
    expect(d.told).toEqual([{ error: refusal }]);
    expect(state()).toMatchObject({ phase: "failed", lastError: refusal });
    expect(d.lines.some((l) => l.startsWith("reconnect"))).toBe(false);
    expect(existsSync(join(dir(), "daemon.lock"))).toBe(false);
  });

  it("a second daemon in the same state dir is refused while the first runs, which runs on", async () => {
    await world.sandboxWithLocal("dm-d", `127.0.0.1:${echo.port}`);
    const d = daemon({ session: session("dm-d") });
    const first = await waitFor(() => (state()?.phase === "connected" ? state() : undefined), { what: "the first daemon to connect" });
    // The second is the built eph in the foreground: another process, as a user would start it.
    const second = await new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
      const child = spawn(process.execPath, [MAIN, "local", "connect", "--foreground", "--no-proxies", "--sandbox", "dm-d"], {
        env: { ...process.env, EPHEMERA_HOME: home, EPHEMERA_TUNNEL: world.tunnel.address, EPHEMERA_TOKEN: TOKENS.editor }, stdio: ["ignore", "ignore", "pipe"],
      });
      let stderr = "";
      child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
      child.on("error", reject).on("close", (code) => resolve({ code, stderr }));
      leftovers.push(async () => { if (child.pid && alive(child.pid)) child.kill("SIGKILL"); });
    });
    expect(second.code).toBe(1);
    expect(second.stderr).toContain(`already connected: eph local connect runs as pid ${process.pid} (state in ${dir()})`);
    expect(state()).toEqual(first);
    expect(world.tunnel.server.sessions.size).toBe(1);
    await d.stop();
    expect(state()).toBeUndefined();
  });

  it("answers on control.sock (mode 0600) through its session: the tunnel's refusals with their status, the socket gone on stop", async () => {
    await world.sandboxWithLocal("dm-e", `127.0.0.1:${echo.port}`);
    await world.sandboxWithLocal("dm-f", `127.0.0.1:${echo.port}`);
    const d = daemon({ session: session("dm-e") });
    await waitFor(() => state()?.phase === "connected", { what: "the daemon to connect" });
    expect(statSync(controlPath(dir())).mode & 0o777).toBe(0o600);
    // This tunnel sees no cluster; the one reading a kube-sim answers in environment.e2e.spec.ts.
    const noCluster = await askEnvironment(dir(), "dm-e", "backend").catch((err: unknown) => err) as ControlRefused;
    expect(noCluster).toBeInstanceOf(ControlRefused);
    expect([noCluster.status, noCluster.message]).toEqual([501, "the tunnel cannot see a cluster (it runs without a kubeconfig): the baseline's environment cannot be read here"]);
    const unserved = await askEnvironment(dir(), "dm-f", "backend").catch((err: unknown) => err) as ControlRefused;
    expect([unserved.status, unserved.message]).toEqual([403, `session ${state()!.sessionId} does not serve local backend of sandbox dm-f (it serves: dm-e/backend)`]);
    await d.stop();
    expect(existsSync(controlPath(dir()))).toBe(false);
  });
});

// The docker runtime's cluster DNS is what resolves the Service's name: where Docker cannot
// run, this suite says so in one line (test/support/docker.ts).
describeWithDocker("the daemon's host entries (--hosts) for a kube-sim's Services", () => {
  let cluster: Cluster;
  let world: TunnelWorld;
  let service: Awaited<ReturnType<typeof echoServer>>;
  let namespace: string;
  beforeAll(async () => {
    // The docker runtime: its cluster DNS resolves the Service's name for the tunnel's dial.
    cluster = await startCluster("docker");
    namespace = await cluster.namespace("dm");
    service = await echoServer("svc:");
    // Headless, its endpoint the server on this machine: `backend.<ns>.svc` is 127.0.0.1 to the cluster DNS.
    await cluster.service(namespace, "backend", [service.port], "127.0.0.1");
    world = await startWorld({ listServices: cluster.listServices([namespace]), dns: cluster.dns });
  });
  afterAll(async () => {
    await world?.stop();
    await service?.close();
    await cluster?.stop();
  });

  it("writes the block naming the Service, forwards its address and port through the tunnel's dial, and removes the block on stop", async () => {
    const hostsFile = join(home, "hosts");
    writeFileSync(hostsFile, "127.0.0.1\tlocalhost\n");
    const d = daemon({ session: { address: world.tunnel.address }, hostsFile });
    const entry = await waitFor(() => state()?.hosts?.[0], { what: "the host entries" });
    const names = [`backend.${namespace}.svc`, `backend.${namespace}`];
    expect(state()!.hosts).toEqual([{ names, address: expect.stringMatching(/^127\.77\.\d+\.\d+$/), ports: [service.port] }]);
    expect(state()!.hostsError).toBeUndefined();
    expect(readFileSync(hostsFile, "utf8")).toBe(`127.0.0.1\tlocalhost\n# BEGIN ephemera local (eph local connect --hosts; removed by eph local disconnect)\n${entry.address}\t${names.join(" ")}\n# END ephemera local\n`);

    // The listener's connection is dialled by the tunnel as the Service's name, which the cluster DNS resolves.
    expect(await exchange(entry.address, service.port, "ping", "svc:ping")).toBe("svc:ping");
    const sessionId = state()!.sessionId!;
    const conn = await world.waitForEvent(TUNNEL, sessionId, "ephemera.tunnel.connection_closed.v1");
    expect(conn.data).toEqual(expect.objectContaining({ direction: "to_cluster", target: `backend.${namespace}.svc:${service.port}`, bytesToCluster: 4, bytesToWorkstation: 8 }));

    await d.stop();
    expect(readFileSync(hostsFile, "utf8")).toBe("127.0.0.1\tlocalhost\n");
    await expect(exchange(entry.address, service.port, "ping", "svc:ping")).rejects.toThrow(/ECONNREFUSED/);
    expect(state()).toBeUndefined();
  });
});
