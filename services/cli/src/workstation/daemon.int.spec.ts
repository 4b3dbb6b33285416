// The daemon against an in-memory twin of the tunnel session whose dial reaches real local
// servers: its state file through connect, a lost session, reconnects and stop; a refusal
// that ends it; the host entries written and served, and removed when it stops.
import { EventEmitter } from "node:events";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, existsSync } from "node:fs";
import { createServer, connect, type AddressInfo, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "@ephemera/kit";
import { ControlRefused, askEnvironment, controlPath } from "./control.js";
import { runDaemon } from "./daemon.js";
import { readState, type DaemonState } from "./state.js";
import type { ClusterService, Environment, OpenOptions, Served, TunnelSession } from "./tunnel.js";

const SERVING: Served[] = [{ sandbox: "dev", routingKey: "rk1", local: "api", mappings: [{ port: 8080, toLocal: "localhost:8080" }] }];

class TwinSession extends EventEmitter implements TunnelSession {
  serving = SERVING;
  closedByUs = false;
  constructor(readonly sessionId: string, private readonly backend: () => number, private readonly list: ClusterService[]) {
    super();
  }
  dial = (host: string, port: number) => new Promise<Socket>((resolve, reject) => {
    if (host !== "backend.demo.svc" || port !== 8080) return reject(new Error(`no ${host}:${port}`));
    const s = connect(this.backend(), "127.0.0.1", () => resolve(s)).once("error", reject);
  });
  services = async () => this.list;
  /** What the tunnel would answer: an environment for a served local, else its 403. */
  environment = async (sandbox: string, local: string): Promise<Environment> => {
    if (!this.serving.some((s) => s.sandbox === sandbox && s.local === local)) {
      throw Object.assign(new Error("refused"), { name: "TunnelRefused", status: 403, reason: `session ${this.sessionId} does not serve local ${local} of sandbox ${sandbox}` });
    }
    return {
      sandbox, local, baseline: { kind: "Deployment", namespace: "demo", name: local, container: "app" },
      env: [{ name: "FROM", value: this.sessionId }], values: { env: [], files: [] }, unresolved: [],
    };
  };
  close = async () => {
    this.closedByUs = true;
  };
  lose(): void {
    this.emit("closed", { reason: "lost", error: new Error("no PING answer within 5 s") });
  }
}

class Refused extends Error {
  override readonly name = "TunnelRefused";
}

let dir: string;
let backend: Server;
const stop = new AbortController();
const backendPort = () => (backend.address() as AddressInfo).port;

beforeAll(async () => {
  backend = createServer((s) => s.end("from backend"));
  await new Promise<void>((resolve) => backend.listen(0, "127.0.0.1", resolve));
});
afterAll(async () => {
  stop.abort();
  await new Promise((resolve) => backend.close(resolve));
});
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "eph-daemon-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const session: OpenOptions = { address: "127.0.0.1:7785" };
const state = () => readState(dir);

it("keeps its state through connect, a lost session, failed reconnects and the reconnect; stops cleanly", async () => {
  const sessions: TwinSession[] = [];
  let failing = 0;
  const controller = new AbortController();
  const lines: string[] = [];
  let ready: { state: DaemonState } | { error: string } | undefined;
  const running = runDaemon({
    dir, session, signal: controller.signal, httpProxy: "127.0.0.1:0", log: (l) => lines.push(l), ready: (o) => (ready = o),
    backoff: { initialDelay: 10, maxDelay: 50 },
    open: async () => {
      if (failing > 0) {
        failing--;
        throw new Error("connect ECONNREFUSED 127.0.0.1:7785");
      }
      const s = new TwinSession(`s${sessions.length + 1}`, backendPort, []);
      sessions.push(s);
      return s;
    },
  });
  await waitFor(() => ready, { what: "the daemon to connect" });
  expect(ready).toEqual({ state: expect.objectContaining({ phase: "connected", sessionId: "s1", serving: SERVING }) });
  expect(state()).toMatchObject({ pid: process.pid, tunnel: "127.0.0.1:7785", phase: "connected", sessionId: "s1", proxies: { http: expect.stringMatching(/^127\.0\.0\.1:\d+$/) } });

  failing = 3;
  sessions[0]!.lose();
  await waitFor(() => state()?.phase === "connected" && state()?.sessionId === "s2", { what: "the reconnect" });
  expect(lines.filter((l) => l.startsWith("reconnect attempt"))).toEqual([
    expect.stringMatching(/^reconnect attempt 1 failed: connect ECONNREFUSED 127\.0\.0\.1:7785; next in \d+ ms$/),
    expect.stringMatching(/^reconnect attempt 2 failed/),
    expect.stringMatching(/^reconnect attempt 3 failed/),
  ]);
  expect(lines).toContain("reconnecting: lost: no PING answer within 5 s");

  sessions[1]!.serving = [];
  sessions[1]!.emit("serving", []);
  await waitFor(() => state()?.serving.length === 0, { what: "the new serving list in the state" });

  controller.abort();
  await running;
  expect(sessions[1]!.closedByUs).toBe(true);
  expect(state()).toBeUndefined();
  expect(existsSync(join(dir, "daemon.lock"))).toBe(false);
});

it("a refusal on reconnect ends the daemon with the tunnel's reason, its state saying so", async () => {
  let opened = 0;
  const first = new TwinSession("s1", backendPort, []);
  const running = runDaemon({
    dir, session, signal: stop.signal, log: () => {}, backoff: { initialDelay: 10, maxDelay: 50 },
    open: async () => {
      if (opened++ === 0) return first;
      throw new Refused("403 the token's role may not serve sandbox dev");
    },
  });
  await waitFor(() => state()?.phase === "connected", { what: "the daemon to connect" });
  first.lose();
  await expect(running).rejects.toThrow("403 the token's role may not serve sandbox dev");
  expect(state()).toMatchObject({ phase: "failed", lastError: "403 the token's role may not serve sandbox dev" });
});

it("a second daemon in the same state dir is refused while the first runs", async () => {
  const controller = new AbortController();
  const open = async () => new TwinSession("s1", backendPort, []);
  const first = runDaemon({ dir, session, signal: controller.signal, log: () => {}, open });
  await waitFor(() => state()?.phase === "connected", { what: "the first daemon to connect" });
  writeFileSync(join(dir, "daemon.lock"), `${process.ppid}\n`);
  await expect(runDaemon({ dir, session, signal: controller.signal, log: () => {}, open })).rejects.toThrow(`already connected: eph local connect runs as pid ${process.ppid}`);
  controller.abort();
  await first;
});

it("--hosts: writes the block, forwards each Service's address and port through dial, and removes the block on stop", async () => {
  const hostsFile = join(dir, "hosts");
  writeFileSync(hostsFile, "127.0.0.1\tlocalhost\n");
  const controller = new AbortController();
  const running = runDaemon({
    dir, session, signal: controller.signal, log: () => {}, hostsFile,
    open: async () => new TwinSession("s1", backendPort, [{ namespace: "demo", name: "backend", ports: [8080] }]),
  });
  const entry = await waitFor(() => state()?.hosts?.[0], { what: "the host entries" });
  expect(entry.names).toEqual(["backend.demo.svc", "backend.demo"]);
  expect(readFileSync(hostsFile, "utf8")).toContain(`${entry.address}\tbackend.demo.svc backend.demo\n`);
  const answer = await new Promise<string>((resolve, reject) => {
    let got = "";
    connect(8080, entry.address).on("data", (c) => (got += c.toString())).on("end", () => resolve(got)).on("error", reject);
  });
  expect(answer).toBe("from backend");
  controller.abort();
  await running;
  expect(readFileSync(hostsFile, "utf8")).toBe("127.0.0.1\tlocalhost\n");
});

it("answers a local's environment on control.sock (mode 0600) through the session it holds, the tunnel's refusal with its status", async () => {
  const controller = new AbortController();
  const running = runDaemon({ dir, session, signal: controller.signal, log: () => {}, open: async () => new TwinSession("s1", backendPort, []) });
  await waitFor(() => state()?.phase === "connected", { what: "the daemon to connect" });
  expect(statSync(controlPath(dir)).mode & 0o777).toBe(0o600);
  expect(await askEnvironment(dir, "dev", "api")).toEqual({
    sandbox: "dev", local: "api", baseline: { kind: "Deployment", namespace: "demo", name: "api", container: "app" },
    env: [{ name: "FROM", value: "s1" }], values: { env: [], files: [] }, unresolved: [],
  });
  const refused = await askEnvironment(dir, "dev", "web").catch((err: unknown) => err) as ControlRefused;
  expect(refused).toBeInstanceOf(ControlRefused);
  expect([refused.status, refused.message]).toEqual([403, "session s1 does not serve local web of sandbox dev"]);
  controller.abort();
  await running;
  expect(existsSync(controlPath(dir))).toBe(false);
});
