// `pnpm start` supervises: a service that dies is restarted with backoff, start-up fails
// naming a service that keeps dying, and stop() ends every child for good. Most tests use
// tiny fake services (entry scripts); the last one runs the built services.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { waitFor } from "@ephemera/kit";
import { NATS_URL, REDIS_URL, removePrefix, uniquePrefix } from "../../../test/support/servers.js";
import { freePort } from "../../../test/support/stack.js";
import {
  SERVICES, StackInterruptedError, StackNotReadyError, healthy, startStack,
  type RunningStack, type ServiceName, type StackOptions,
} from "./index.js";

interface Line { service: ServiceName; line: string }
interface StackLine { service: ServiceName; msg: string; code: number | null; signal: string | null; attempt: number; delayMs: number }

const KIT = pathToFileURL(join(__dirname, "..", "..", "kit", "dist", "index.js")).href;
const dir = mkdtempSync(join(tmpdir(), "stack-supervise-"));
const script = (name: string, body: string) => {
  const path = join(dir, `${name}.mjs`);
  writeFileSync(path, `console.log("up " + process.pid);\n${body}\n`);
  return path;
};
const serving = (variable: string) => `
import { createLogger, startGrpcServer } from ${JSON.stringify(KIT)};
const server = await startGrpcServer(process.env[${JSON.stringify(variable)}], [], createLogger("fake", "silent"));
process.on("SIGTERM", () => void server.shutdown().then(() => process.exit(0)));`;
const fake = {
  api: script("api", serving("EPHEMERA_API_LISTEN")),
  iocontext: script("iocontext", serving("EPHEMERA_IOCONTEXT_LISTEN")),
  idle: script("idle", "setInterval(() => {}, 1 << 30);"),
  /** Answers /healthz once it has counted to EPHEMERA_FAKE_HEALTH_AFTER requests (a console still starting). */
  console: script("console", `
import { createServer } from "node:http";
const listen = process.env.EPHEMERA_CONSOLE_LISTEN;
let asked = 0;
createServer((req, res) => { res.writeHead(req.url === "/healthz" && ++asked > 3 ? 200 : 503); res.end(); })
  .listen(Number(listen.slice(listen.lastIndexOf(":") + 1)), "127.0.0.1");
process.on("SIGTERM", () => process.exit(0));`),
  exit0: script("exit0", "process.exit(0);"),
  exit3: script("exit3", "process.exit(3);"),
  ignoresTerm: script("ignores-term", `process.on("SIGTERM", () => console.log("ignoring SIGTERM")); setInterval(() => {}, 1 << 30); console.log("ready");`),
  failsOnTerm: script("fails-on-term", `process.on("SIGTERM", () => process.exit(1)); setInterval(() => {}, 1 << 30);`),
};
const DEFAULT_ENTRIES: Record<ServiceName, string> = { sandbox: fake.api, iocontext: fake.iocontext, scheduler: fake.idle, runner: fake.idle, webhook: fake.idle, tunnel: fake.idle, console: fake.idle };

/** The stack's own lines about deaths of `service`. */
const deaths = (lines: Line[], service: ServiceName): StackLine[] =>
  lines.flatMap((l) => {
    if (l.service !== service || !l.line.startsWith("{")) return [];
    const rec = JSON.parse(l.line) as StackLine & { name?: string };
    return rec.name === "stack" ? [rec] : [];
  });
/** Every process a fake service started (each prints `up PID` first). */
const pidsSeen = (lines: Line[]) => lines.flatMap((l) => /^up (\d+)$/.exec(l.line)?.slice(1).map(Number) ?? []);
const alive = (pid: number) => {
  try { process.kill(pid, 0); return true; } catch { return false; }
};

const stacks: RunningStack[] = [];
afterEach(async () => { await Promise.all(stacks.splice(0).map((s) => s.stop())); });
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function fakeStack(entries: Partial<Record<ServiceName, string>>, { env: more, ...options }: Partial<StackOptions> = {}) {
  const lines: Line[] = [];
  const api = `127.0.0.1:${await freePort()}`;
  const stack = await startStack({
    env: { ...process.env, EPHEMERA_API_LISTEN: api, EPHEMERA_IOCONTEXT_LISTEN: `127.0.0.1:${await freePort()}`, EPHEMERA_ROUTES_LISTEN: "127.0.0.1:0", EPHEMERA_ROUTES_HTTP_LISTEN: "127.0.0.1:0", EPHEMERA_GATEWAY_LISTEN: "127.0.0.1:0", EPHEMERA_JOBS_LISTEN: "127.0.0.1:0", EPHEMERA_METRICS_LISTEN: "127.0.0.1:0", EPHEMERA_CONSOLE_LISTEN: "127.0.0.1:0", ...more },
    entry: (s) => entries[s] ?? DEFAULT_ENTRIES[s],
    output: (service, line) => lines.push({ service, line }),
    backoff: { initialMs: 20, maxMs: 160 },
    stopGraceMs: 5000,
    readyTimeoutMs: 15_000,
    ...options,
  });
  stacks.push(stack);
  return { stack, lines, api };
}

describe("stack supervision with fake services", () => {
  it("is ready only once the console answers /healthz on its port, and says where it is", async () => {
    const port = await freePort();
    const { stack, lines } = await fakeStack({ console: fake.console }, { env: { EPHEMERA_CONSOLE_LISTEN: `127.0.0.1:${port}` } });
    expect(stack.console).toBe(`http://127.0.0.1:${port}`);
    expect(lines.filter((l) => l.service === "console").map((l) => l.line)).toEqual([`up ${stack.pid("console")}`]);
    const res = await fetch(`${stack.console}/healthz`);
    expect(res.status).toBe(200);
  });

  it("restarts a service killed by SIGKILL, logs the restart, and serves the API again", async () => {
    const { stack, lines, api } = await fakeStack({});
    const runner = stack.pid("runner")!;
    process.kill(runner, "SIGKILL");
    await waitFor(() => stack.restarts("runner") === 1 && stack.pid("runner"), { what: "the runner to be restarted" });
    expect(stack.pid("runner")).not.toBe(runner);
    expect(deaths(lines, "runner")).toEqual([
      expect.objectContaining({ msg: "runner was killed by SIGKILL; restarting", code: null, signal: "SIGKILL", attempt: 1, delayMs: 20 }),
    ]);

    const sandbox = stack.pid("sandbox")!;
    process.kill(sandbox, "SIGKILL");
    await waitFor(() => stack.restarts("sandbox") === 1, { what: "the API to be restarted" });
    await healthy(api, 10_000);
    expect(stack.pid("sandbox")).not.toBe(sandbox);
    expect(stack.restarts("iocontext") + stack.restarts("scheduler")).toBe(0);
  });

  it("backs off exponentially up to the cap while a service keeps dying, whatever its exit code", async () => {
    const { lines } = await fakeStack({ runner: fake.exit3, scheduler: fake.exit0 });
    const runner = await waitFor(() => deaths(lines, "runner").length >= 6 && deaths(lines, "runner"), { what: "six runner deaths" });
    expect(runner.slice(0, 6).map((d) => [d.code, d.attempt, d.delayMs])).toEqual([
      [3, 1, 20], [3, 2, 40], [3, 3, 80], [3, 4, 160], [3, 5, 160], [3, 6, 160],
    ]);
    const scheduler = await waitFor(() => deaths(lines, "scheduler").length >= 2 && deaths(lines, "scheduler"), { what: "scheduler deaths" });
    expect(scheduler[1]).toMatchObject({ msg: "scheduler exited with code 0; restarting", code: 0, attempt: 2 });
  });

  it("takes its start-up deadline from EPHEMERA_STACK_READY_TIMEOUT_MS when the caller gives none", async () => {
    const failure = await fakeStack({ sandbox: fake.exit3 }, { readyTimeoutMs: undefined, env: { EPHEMERA_STACK_READY_TIMEOUT_MS: "5000" } })
      .then(() => undefined, (err: unknown) => err);
    expect(failure).toBeInstanceOf(StackNotReadyError);
    expect((failure as StackNotReadyError).message).toMatch(/^the stack was not ready within 5000 ms: sandbox kept dying/);
  });

  it("fails start-up by its deadline, naming the service that keeps dying, and leaves no process behind", async () => {
    const lines: Line[] = [];
    const started = Date.now();
    // 5 s: a service that keeps dying must die at least twice in it, even where starting Node takes a second or more.
    const failure = await fakeStack({ sandbox: fake.exit3 }, { readyTimeoutMs: 5000, output: (service, line) => lines.push({ service, line }) })
      .then(() => undefined, (err: unknown) => err);
    expect(failure).toBeInstanceOf(StackNotReadyError);
    const err = failure as StackNotReadyError;
    expect(err.message).toMatch(/^the stack was not ready within 5000 ms: sandbox kept dying \(\d+ times, last it exited with code 3\)$/);
    expect(err.dying.map((d) => d.service)).toEqual(["sandbox"]);
    expect(err.dying[0]!.deaths).toBeGreaterThanOrEqual(2);
    expect(Date.now() - started).toBeGreaterThanOrEqual(5000);
    expect(pidsSeen(lines).length).toBeGreaterThan(SERVICES.length);
    expect(pidsSeen(lines).filter(alive)).toEqual([]);
  });

  it("stops during start-up when its signal is aborted", async () => {
    const lines: Line[] = [];
    const interrupt = new AbortController();
    const failure = await fakeStack({ sandbox: fake.exit3 }, {
      signal: interrupt.signal,
      output: (service, line) => {
        lines.push({ service, line });
        if (deaths(lines, "sandbox").length) interrupt.abort();
      },
    }).then(() => undefined, (err: unknown) => err);
    expect(failure).toBeInstanceOf(StackInterruptedError);
    expect(pidsSeen(lines).filter(alive)).toEqual([]);
  });

  it("stop() ends every child, SIGKILLs one that ignores SIGTERM after the grace period, and restarts none", async () => {
    const { stack, lines } = await fakeStack({ runner: fake.ignoresTerm, scheduler: fake.failsOnTerm }, { stopGraceMs: 300 });
    await waitFor(() => lines.some((l) => l.service === "runner" && l.line === "ready"), { what: "the runner to handle SIGTERM" });
    const pids = SERVICES.map((s) => stack.pid(s)!);
    expect(pids.every(alive)).toBe(true);

    await stack.stop();
    expect(lines.some((l) => l.service === "runner" && l.line === "ignoring SIGTERM")).toBe(true);
    expect(pids.filter(alive)).toEqual([]);
    expect(SERVICES.map((s) => [s, stack.pid(s), stack.restarts(s)])).toEqual(SERVICES.map((s) => [s, undefined, 0]));
    // Deaths while stopping (exit 1 on SIGTERM, SIGKILL) are not restarts.
    expect(lines.filter((l) => l.line.includes("restarting"))).toEqual([]);
  });

  it("stop() cancels a pending restart", async () => {
    const { stack, lines } = await fakeStack({ runner: fake.exit3 }, { backoff: { initialMs: 600_000 } });
    await waitFor(() => deaths(lines, "runner").length === 1, { what: "the runner's first death" });
    expect(stack.pid("runner")).toBeUndefined();
    // stop() resolves only once every supervisor is done, so the restart can no longer happen.
    await stack.stop();
    expect(stack.restarts("runner")).toBe(0);
    expect(stack.pid("runner")).toBeUndefined();
  });
});

describe("stack supervision with the built services", () => {
  const prefix = uniquePrefix("sup");
  const scratch = mkdtempSync(join(tmpdir(), `${prefix}-`));

  afterAll(async () => {
    await removePrefix(prefix);
    rmSync(scratch, { recursive: true, force: true });
  });

  it("restarts the API service after SIGKILL and stops every service for good", async () => {
    const lines: Line[] = [];
    const api = `127.0.0.1:${await freePort()}`;
    const stack = await startStack({
      env: {
        ...process.env, NATS_URL, REDIS_URL, LOG_LEVEL: "warn",
        EPHEMERA_PREFIX: prefix,
        EPHEMERA_API_LISTEN: api,
        EPHEMERA_IOCONTEXT_LISTEN: `127.0.0.1:${await freePort()}`,
        EPHEMERA_ROUTES_LISTEN: "127.0.0.1:0", EPHEMERA_ROUTES_HTTP_LISTEN: "127.0.0.1:0", EPHEMERA_GATEWAY_LISTEN: "127.0.0.1:0", EPHEMERA_JOBS_LISTEN: "127.0.0.1:0", EPHEMERA_METRICS_LISTEN: "127.0.0.1:0",
        EPHEMERA_TUNNEL_LISTEN: "127.0.0.1:0", EPHEMERA_CONSOLE_LISTEN: "127.0.0.1:0",
        EPHEMERA_RUNNER_WORKDIR: join(scratch, "runs"),
      },
      entry: (service) => join(__dirname, "..", "..", service, "dist", "main.js"),
      output: (service, line) => lines.push({ service, line }),
      readyTimeoutMs: 45_000,
    });
    stacks.push(stack);

    const killed = stack.pid("sandbox")!;
    process.kill(killed, "SIGKILL");
    await waitFor(() => stack.restarts("sandbox") === 1 && stack.pid("sandbox"), { timeoutMs: 10_000, what: "the sandbox service to be restarted" });
    expect(stack.pid("sandbox")).not.toBe(killed);
    expect(deaths(lines, "sandbox")).toEqual([expect.objectContaining({ signal: "SIGKILL", attempt: 1, delayMs: 250 })]);
    await healthy(api, 30_000);

    const pids = [killed, ...SERVICES.map((s) => stack.pid(s)!)];
    await stack.stop();
    expect(pids.filter(alive)).toEqual([]);
    expect(SERVICES.map((s) => stack.pid(s))).toEqual(SERVICES.map(() => undefined));
    expect(SERVICES.map((s) => stack.restarts(s))).toEqual([0, 0, 0, 1, 0, 0]);
    expect(lines.filter((l) => l.service === "tunnel" && /"level":(50|60)/.test(l.line))).toEqual([]);
  });
});
