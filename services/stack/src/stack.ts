// Runs the whole of ephemera locally: the four services as child processes with the
// process driver for cluster `local`, ready once the API and the IO context answer
// health checks. If one service dies, the stack stops.
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { DEFAULT_API_LISTEN, DEFAULT_IOCONTEXT_LISTEN, envString, grpc, waitFor, type Env } from "@ephemera/kit";

export const SERVICES = ["iocontext", "scheduler", "runner", "sandbox"] as const;
export type ServiceName = (typeof SERVICES)[number];

export interface StackOptions {
  env: Env;
  /** Where a service's log lines go (already formatted). */
  output: (service: ServiceName, line: string) => void;
  /** Path of a service's built entry point. */
  entry: (service: ServiceName) => string;
  readyTimeoutMs?: number;
}

export interface RunningStack {
  api: string;
  iocontext: string;
  /** Resolves with the first service that exited, and its code. */
  exited: Promise<{ service: ServiceName; code: number | null }>;
  stop(): Promise<void>;
}

/** The environment each service gets: the caller's, plus the stack's defaults. */
export function stackEnv(env: Env): Env {
  const api = envString(env, "EPHEMERA_API_LISTEN", DEFAULT_API_LISTEN);
  const io = envString(env, "EPHEMERA_IOCONTEXT_LISTEN", DEFAULT_IOCONTEXT_LISTEN);
  return {
    ...env,
    EPHEMERA_API_LISTEN: api,
    EPHEMERA_IOCONTEXT_LISTEN: io,
    EPHEMERA_IOCONTEXT_ADDR: envString(env, "EPHEMERA_IOCONTEXT_ADDR", io),
    EPHEMERA_CLUSTER: envString(env, "EPHEMERA_CLUSTER", "local"),
    EPHEMERA_RUNNER_DRIVER: envString(env, "EPHEMERA_RUNNER_DRIVER", "process"),
    // Health ports of the services without an API: any free port unless chosen.
    EPHEMERA_SCHEDULER_LISTEN: envString(env, "EPHEMERA_SCHEDULER_LISTEN", "127.0.0.1:0"),
    EPHEMERA_RUNNER_LISTEN: envString(env, "EPHEMERA_RUNNER_LISTEN", "127.0.0.1:0"),
  };
}

export async function startStack(options: StackOptions): Promise<RunningStack> {
  const env = stackEnv(options.env);
  const children = new Map<ServiceName, ChildProcess>();
  let stopping = false;
  let onExit!: (v: { service: ServiceName; code: number | null }) => void;
  const exited = new Promise<{ service: ServiceName; code: number | null }>((r) => (onExit = r));
  for (const service of SERVICES) {
    const child = spawn(process.execPath, [options.entry(service)], {
      env: env as NodeJS.ProcessEnv,
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.set(service, child);
    for (const stream of [child.stdout!, child.stderr!]) {
      createInterface({ input: stream }).on("line", (line) => options.output(service, line));
    }
    child.on("exit", (code) => {
      children.delete(service);
      if (!stopping) onExit({ service, code });
    });
  }
  const stop = async () => {
    stopping = true;
    const all = [...children.values()];
    await Promise.all(all.map((c) => new Promise<void>((resolve) => {
      if (c.exitCode !== null || c.signalCode !== null) return resolve();
      const kill = setTimeout(() => c.kill("SIGKILL"), 15_000);
      c.once("exit", () => { clearTimeout(kill); resolve(); });
      c.kill("SIGTERM");
    })));
  };
  const api = env["EPHEMERA_API_LISTEN"]!;
  const iocontext = env["EPHEMERA_IOCONTEXT_LISTEN"]!;
  try {
    await Promise.race([
      Promise.all([healthy(api, options.readyTimeoutMs), healthy(iocontext, options.readyTimeoutMs)]),
      exited.then(({ service, code }) => { throw new Error(`${service} exited with code ${code} during start-up`); }),
    ]);
  } catch (err) {
    await stop();
    throw err;
  }
  return { api, iocontext, exited, stop };
}

const HealthClient = grpc.makeGenericClientConstructor({
  check: {
    path: "/grpc.health.v1.Health/Check",
    requestStream: false,
    responseStream: false,
    requestSerialize: (v: Buffer) => v,
    requestDeserialize: (v: Buffer) => v,
    responseSerialize: (v: Buffer) => v,
    responseDeserialize: (v: Buffer) => v,
  },
}, "Health");

/** Waits until the gRPC server at `address` reports SERVING (status field 1 = SERVING). */
export async function healthy(address: string, timeoutMs = 30_000): Promise<void> {
  const client = new HealthClient(address, grpc.credentials.createInsecure());
  try {
    await waitFor(() => new Promise<boolean>((resolve) => {
      client.makeUnaryRequest("/grpc.health.v1.Health/Check", (v: Buffer) => v, (v: Buffer) => v, Buffer.alloc(0),
        { deadline: Date.now() + 1000 }, (err, res?: Buffer) => resolve(!err && !!res && res[0] === 0x08 && res[1] === 0x01));
    }), { timeoutMs, intervalMs: 100, what: `gRPC health of ${address}` });
  } finally {
    client.close();
  }
}
