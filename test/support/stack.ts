// Runs the built stack (`pnpm start`'s entry) and the built `eph` as processes, the way a
// user does, under a fresh EPHEMERA_PREFIX and free ports; removes what they created.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectNats, JetStreamEventStore, type RecordedEvent } from "@ephemera/eventstore";
import { waitFor } from "@ephemera/kit";
import { NATS_URL, REDIS_URL, removePrefix, uniquePrefix } from "./servers.js";

const ROOT = join(__dirname, "..", "..");

/**
 * A free port for a service a test starts, picked below the kernel's ephemeral range
 * (32768–60999 here): a port the kernel hands out for `:0` (another service's listener, a
 * client's connection) is then never one a test chose and is about to listen on, which
 * made a test reach another test's server on its API address.
 */
export async function freePort(): Promise<number> {
  for (let tries = 0; ; tries++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    const free = await new Promise<boolean>((resolve) => {
      const s = createServer();
      s.once("error", () => resolve(false));
      s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)));
    });
    if (free) return port;
    if (tries > 50) throw new Error("no free port between 20000 and 32000 after 50 tries");
  }
}

export interface EphResult { code: number; stdout: string; stderr: string }

export interface TestStack {
  prefix: string;
  api: string;
  output: string[];
  /** Runs `eph ARGS` against this stack. */
  eph(args: string[], opts?: { stdin?: string; cwd?: string }): Promise<EphResult>;
  /** Writes a file into this stack's scratch directory and returns its path. */
  file(name: string, content: string): string;
  /** Every event in the store, in order. */
  events(): Promise<RecordedEvent[]>;
  stop(): Promise<void>;
}

/** `env`: more settings for the stack (EPHEMERA_RUNNER_DRIVER, KUBECONFIG, ...). */
export async function startTestStack(tag = "e2e", more: Record<string, string> = {}): Promise<TestStack> {
  const prefix = uniquePrefix(tag);
  const [apiPort, ioPort] = [await freePort(), await freePort()];
  const api = `127.0.0.1:${apiPort}`;
  const scratch = mkdtempSync(join(tmpdir(), `${prefix}-`));
  const env = {
    ...process.env,
    NATS_URL, REDIS_URL,
    EPHEMERA_PREFIX: prefix,
    EPHEMERA_API_LISTEN: api,
    EPHEMERA_IOCONTEXT_LISTEN: `127.0.0.1:${ioPort}`,
    EPHEMERA_RUNNER_WORKDIR: join(scratch, "runs"),
    EPHEMERA_LOG_FORMAT: "json",
    // The Routes API on free ports: stacks run side by side.
    EPHEMERA_ROUTES_LISTEN: "127.0.0.1:0", EPHEMERA_ROUTES_HTTP_LISTEN: "127.0.0.1:0", EPHEMERA_GATEWAY_LISTEN: "127.0.0.1:0", EPHEMERA_JOBS_LISTEN: "127.0.0.1:0", EPHEMERA_TUNNEL_LISTEN: "127.0.0.1:0",
    EPHEMERA_CONSOLE_LISTEN: "127.0.0.1:0",
    // The webhook (Kubernetes driver) too.
    EPHEMERA_WEBHOOK_LISTEN: "127.0.0.1:0",
    ...more,
  };
  const output: string[] = [];
  const child = spawn(process.execPath, [join(ROOT, "services/stack/dist/main.js")], { env, stdio: ["ignore", "pipe", "pipe"] });
  child.stdout.on("data", (d: Buffer) => output.push(...d.toString().split("\n").filter(Boolean)));
  child.stderr.on("data", (d: Buffer) => output.push(...d.toString().split("\n").filter(Boolean)));
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  try {
    await waitFor(() => {
      if (child.exitCode !== null) throw new Error(`stack exited ${child.exitCode}:\n${output.join("\n")}`);
      return output.some((l) => l.includes("ephemera is up"));
    }, { timeoutMs: 45_000, intervalMs: 50, what: "the stack to come up" });
  } catch (err) {
    child.kill("SIGKILL");
    throw new Error(`${(err as Error).message}\n${output.slice(-40).join("\n")}`, { cause: err });
  }

  const eph = (args: string[], opts: { stdin?: string; cwd?: string } = {}) =>
    new Promise<EphResult>((resolve) => {
      const p = spawn(process.execPath, [join(ROOT, "services/cli/dist/bundle/main.js"), ...args], {
        env: { ...process.env, EPHEMERA_API: api }, cwd: opts.cwd ?? scratch, stdio: ["pipe", "pipe", "pipe"],
      });
      let stdout = "";
      let stderr = "";
      p.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
      p.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      p.stdin.end(opts.stdin ?? "");
      p.on("exit", (code) => resolve({ code: code ?? -1, stdout, stderr }));
    });

  const events = async () => {
    const nc = await connectNats(NATS_URL, "e2e-reader");
    try {
      const store = await JetStreamEventStore.open(nc, { prefix });
      const all: RecordedEvent[] = [];
      const sub = store.follow({}, (c) => { all.push(...c.events); });
      await sub.caughtUp;
      await sub.stop();
      return all;
    } finally {
      await nc.close();
    }
  };

  return {
    prefix, api, output, eph, events,
    file: (name, content) => { const p = join(scratch, name); writeFileSync(p, content); return p; },
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
      await removePrefix(prefix);
      rmSync(scratch, { recursive: true, force: true });
    },
  };
}
