// A NATS (with JetStream) and a Redis of a test's own, on free ports with their data in a
// directory of the test's: tests that stop, restart or flush a server use these and never
// the shared ones of the machine (4222, 6379). Stopped by PID; a restart reuses the port
// and the directory, as a server that comes back after a crash does.
import { mkdirSync } from "node:fs";
import { waitFor } from "@ephemera/kit";
import { ManagedProcess, RingBuffer, describeExit } from "./processes.js";
import { freePort } from "./stack.js";

const NATS_SERVER = "/usr/sbin/nats-server";
const REDIS_SERVER = "redis-server";

interface ServerSpec {
  name: string;
  command: string;
  args: (port: number, dir: string) => string[];
  /** A line of the server's output that says it takes connections. */
  ready: RegExp;
}

/** One server process at a time, on a fixed port and directory, that can be stopped and started again. */
export class OwnServer {
  readonly log = new RingBuffer(500);
  private process?: ManagedProcess;

  private constructor(private readonly spec: ServerSpec, readonly port: number, readonly dir: string) {}

  static async start(spec: ServerSpec, dir: string, startTimeoutMs = 20_000): Promise<OwnServer> {
    mkdirSync(dir, { recursive: true });
    const server = new OwnServer(spec, await freePort(), dir);
    await server.start(startTimeoutMs);
    return server;
  }

  get pid(): number | undefined {
    return this.process?.running ? this.process.pid : undefined;
  }

  get running(): boolean {
    return this.process?.running ?? false;
  }

  /** Starts the server (again) on its port and directory and waits until it takes connections. */
  async start(timeoutMs = 20_000): Promise<void> {
    if (this.process?.running) throw new Error(`${this.spec.name} is already running (pid ${this.process.pid})`);
    let ready = false;
    const p = new ManagedProcess(this.spec.name, {
      command: this.spec.command,
      args: this.spec.args(this.port, this.dir),
      log: this.log,
      onLine: (line) => { if (this.spec.ready.test(line)) ready = true; },
    });
    this.process = p;
    try {
      await waitFor(() => {
        if (p.exit) throw new Error(`${this.spec.name} exited during start-up: ${describeExit(p.exit)}`);
        return ready;
      }, { timeoutMs, intervalMs: 20, what: `${this.spec.name} on port ${this.port} to accept connections` });
    } catch (err) {
      await p.stop("SIGKILL");
      throw new Error(`${(err as Error).message}\n${this.tail(30)}`, { cause: err });
    }
  }

  /** SIGTERM (SIGKILL after the grace period) and waits until the process is gone. */
  async stop(signal: NodeJS.Signals = "SIGTERM", graceMs = 10_000): Promise<void> {
    await this.process?.stop(signal, graceMs);
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  tail(n: number): string {
    return this.log.lines().slice(-n).map((l) => `  ${this.spec.name}| ${l.line}`).join("\n");
  }
}

/** nats-server with JetStream, its store under `dir`; `extra`: more flags (`--user u --pass p`). */
export function startOwnNats(dir: string, extra: string[] = []): Promise<OwnServer & { url: string }> {
  return OwnServer.start({
    name: "nats-server",
    command: NATS_SERVER,
    args: (port, store) => ["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", store, ...extra],
    ready: /Server is ready/,
  }, dir).then((s) => Object.assign(s, { url: `nats://127.0.0.1:${s.port}` }));
}

/** redis-server without persistence: a restart comes back empty, like a cache that lost its node. `extra`: more directives (`--user …`). */
export function startOwnRedis(dir: string, extra: string[] = []): Promise<OwnServer & { url: string }> {
  return OwnServer.start({
    name: "redis-server",
    command: REDIS_SERVER,
    args: (port, data) => ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", data, ...extra],
    ready: /Ready to accept connections/,
  }, dir).then((s) => Object.assign(s, { url: `redis://127.0.0.1:${s.port}` }));
}
