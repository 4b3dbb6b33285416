// `eph local` as a user runs it: the built binary against a real tunnel service and a real
// ephemera core. connect in the background, the sandbox's request reaching a server on this
// machine through the tunnel's listener, curl through the HTTP proxy reaching a server by
// dial, status, a second connect refused, the reconnect after the tunnel restarts,
// disconnect, and the stale state a daemon killed with SIGKILL leaves.
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { createServer as createHttpServer, get, type Server as HttpServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { decode } from "@ephemera/events";
import { createLogger, waitFor } from "@ephemera/kit";
import { apiAuthorizer, startTunnel, type RunningTunnel } from "@ephemera/tunnel";
import { startCore, type Core } from "../../../../test/support/core.js";
import { alive, readState } from "./state.js";

const MAIN = join(__dirname, "..", "..", "dist", "bundle", "main.js");
const curl = promisify(execFile);

let core: Core;
let tunnel: RunningTunnel;
let authorizer: ReturnType<typeof apiAuthorizer>;
let local: HttpServer;
let home: string;
const pids = new Set<number>();
const logger = createLogger("tunnel-e2e", "warn");
const port = (s: { address(): AddressInfo | string | null }) => (s.address() as AddressInfo).port;

function eph(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [MAIN, ...args], {
      env: { ...process.env, EPHEMERA_API: core.address, EPHEMERA_HOME: home, EPHEMERA_TUNNEL: tunnel.address, EPHEMERA_LOCAL_BACKOFF: "50,300" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.on("close", (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

const dir = () => join(home, "local");
const daemonPid = () => {
  const pid = readState(dir())?.pid;
  if (pid) pids.add(pid);
  return pid;
};

async function startTunnelOn(listen: string): Promise<RunningTunnel> {
  return startTunnel({
    listen, podAddress: "127.0.0.1", refreshMs: 500, acceptTimeoutMs: 5_000, dns: [], name: "tunnel-e2e",
    liveness: { intervalMs: 200, timeoutMs: 1_000 },
  }, { store: core.store, authorize: authorizer.authorize, logger });
}

/** Where the tunnel listens for the cluster's connections to `local` (from its LocalConnected event). */
async function clusterAddress(session: string): Promise<string> {
  const e = await waitFor(async () => (await core.events()).map((r) => ({ r, d: decode(r) }))
    .find(({ r, d }) => r.type === "ephemera.locals.connected.v1" && d && "sessionId" in d.data && d.data.sessionId === session), { what: "LocalConnected" });
  const data = e.d!.data as { addresses: Array<{ port: number; address: string }> };
  return data.addresses.find((a) => a.port === 8080)!.address;
}

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "eph-local-e2e-"));
  core = await startCore();
  authorizer = apiAuthorizer(core.address, undefined);
  tunnel = await startTunnelOn("127.0.0.1:0");
  local = createHttpServer((req, res) => res.end(`workstation answered ${req.url}`));
  await Promise.all([local].map((s) => new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve))));
  const sandbox = `name: dev\nspec:\n  cluster: local\n  local:\n  - name: api\n    from: {kind: Deployment, namespace: shop, name: api}\n    mappings: [{port: 8080, toLocal: "127.0.0.1:${port(local)}"}]\n`;
  const applied = await eph(["sandbox", "apply", "-f", core.file("sb.yaml", sandbox)]);
  expect(applied.stderr).toBe("");
}, 60_000);

// A test that failed half-way leaves no daemon to the next.
afterEach(async () => {
  const pid = daemonPid();
  if (pid && alive(pid)) await eph(["local", "disconnect"]);
});

afterAll(async () => {
  for (const pid of pids) if (alive(pid)) process.kill(pid, "SIGKILL");
  await tunnel?.stop();
  authorizer?.close();
  await Promise.all([local].map((s) => new Promise((resolve) => s?.close(resolve))));
  await core?.stop();
  rmSync(home, { recursive: true, force: true });
});

it("connects in the background, serves the local workload both ways, reconnects after the tunnel restarts, and disconnects", async () => {
  const connected = await eph(["local", "connect", "--http-proxy", "127.0.0.1:0", "--socks", "127.0.0.1:0"]);
  expect(connected.stderr).toBe("");
  expect(connected.code).toBe(0);
  expect(connected.stdout).toMatch(new RegExp(`^connected to ${tunnel.address} \\(session \\S+, pid \\d+\\)\nserving:\n  dev/api  port 8080 → 127\\.0\\.0\\.1:${port(local)}`));
  const pid = daemonPid()!;
  const first = readState(dir())!;
  expect(first).toMatchObject({ phase: "connected", tunnel: tunnel.address });

  // cluster → workstation: the tunnel's listener for dev/api reaches the server on this machine.
  const address = await clusterAddress(first.sessionId!);
  const answer = await new Promise<string>((resolve, reject) => {
    get(`http://${address}/from-the-cluster`, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c.toString())).on("end", () => resolve(body));
    }).on("error", reject);
  });
  expect(answer).toBe("workstation answered /from-the-cluster");

  // workstation → cluster: curl through the HTTP proxy; the tunnel dials the target.
  const viaProxy = await curl("curl", ["-sS", "--max-time", "10", "-x", `http://${first.proxies.http}`, `http://127.0.0.1:${port(local)}/via-proxy`]);
  expect(viaProxy.stdout).toBe("workstation answered /via-proxy");
  const viaConnect = await curl("curl", ["-sS", "--max-time", "10", "-p", "-x", `http://${first.proxies.http}`, `http://127.0.0.1:${port(local)}/via-connect`]);
  expect(viaConnect.stdout).toBe("workstation answered /via-connect");
  const viaSocks = await curl("curl", ["-sS", "--max-time", "10", "--socks5-hostname", first.proxies.socks!, `http://127.0.0.1:${port(local)}/via-socks`]);
  expect(viaSocks.stdout).toBe("workstation answered /via-socks");

  const status = await eph(["local", "status"]);
  expect(status.code).toBe(0);
  expect(status.stdout).toMatch(new RegExp(`^connected to ${tunnel.address} since \\S+ \\(session ${first.sessionId}, pid ${pid}\\)`));
  // Each served local with its sandbox's status, as the API last said.
  expect(status.stdout).toMatch(/\n {2}dev\/api {2}port 8080 → \S+ {2}\(routing key \S+; sandbox Ready\)\n/);

  const again = await eph(["local", "connect"]);
  expect(again.code).toBe(1);
  expect(again.stderr).toBe(`error: already connected: eph local connect runs as pid ${pid} (tunnel ${tunnel.address}); eph local disconnect ends it\n`);

  // The tunnel goes away: the daemon says it is reconnecting, then reconnects to the new one.
  const listen = tunnel.address;
  await tunnel.stop();
  await waitFor(async () => (await eph(["local", "status"])).code === 2, { timeoutMs: 15_000, what: "status to say reconnecting" });
  expect((await eph(["local", "status", "-o", "json"])).stdout).toMatch(/"status": "reconnecting"/);
  tunnel = await startTunnelOn(listen);
  const back = await waitFor(() => {
    const s = readState(dir());
    return s?.phase === "connected" && s.sessionId !== first.sessionId ? s : undefined;
  }, { timeoutMs: 20_000, what: "the reconnect" });
  expect(back.pid).toBe(pid);
  expect((await eph(["local", "status"])).code).toBe(0);

  const disconnected = await eph(["local", "disconnect"]);
  expect(disconnected).toEqual({ code: 0, stdout: `disconnected from ${tunnel.address} (pid ${pid} ended)\n`, stderr: "" });
  expect(alive(pid)).toBe(false);
  expect(readState(dir())).toBeUndefined();
  expect(await eph(["local", "status"])).toEqual({ code: 1, stdout: "not connected\n", stderr: "" });
  expect(await eph(["local", "disconnect"])).toEqual({ code: 0, stdout: "not connected\n", stderr: "" });
}, 120_000);

it("a daemon killed with SIGKILL leaves a stale state: status says so, connect takes over", async () => {
  expect((await eph(["local", "connect", "--no-proxies"])).code).toBe(0);
  const pid = daemonPid()!;
  process.kill(pid, "SIGKILL");
  await waitFor(() => !alive(pid), { what: `pid ${pid} to die` });
  const stale = await eph(["local", "status"]);
  expect(stale.code).toBe(1);
  expect(stale.stdout).toContain(`not connected (pid ${pid} ended without disconnecting: its state is stale`);
  const taken = await eph(["local", "connect", "--no-proxies"]);
  expect(taken.code).toBe(0);
  const next = daemonPid()!;
  expect(next).not.toBe(pid);
  expect((await eph(["local", "disconnect"])).code).toBe(0);
}, 60_000);

it("a connect the tunnel refuses prints the tunnel's reason and exits 1", async () => {
  const refused = await eph(["local", "connect", "--no-proxies", "--sandbox", "no-such-sandbox"]);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toMatch(/^error: the tunnel refused \(404\): .*no-such-sandbox/);
  expect((await eph(["local", "status"])).stdout).toMatch(/^not connected \(the last connect failed: the tunnel refused \(404\)/);
}, 60_000);
