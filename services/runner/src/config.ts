// The runner's configuration, read from environment variables.
import { join } from "node:path";
import { DEFAULT_IOCONTEXT_LISTEN, commonConfig, envInt, envString, type Env } from "@ephemera/kit";

export const DEFAULT_RUNNER_LISTEN = "127.0.0.1:7403";

export interface RunnerConfig {
  natsUrl: string;
  prefix: string;
  cluster: string;
  /** Steps run at once. */
  concurrency: number;
  driver: "process";
  /** host:port of the IO context service. */
  iocontextAddr: string;
  /** Per-run directories of the process driver live under `<workdir>/runs`. */
  workdir: string;
  /** gRPC health of the runner. */
  listen: string;
  runnerId: string;
  /** io-agent's step program, run by the process driver. */
  stepProgram: string;
  /** Variables passed through to every script (PATH, LANG). */
  hostEnv: Record<string, string>;
  /** Between SIGTERM and SIGKILL when a step is cancelled. */
  cancelGraceMs?: number;
  /** How long running steps may go on after SIGTERM to the runner. */
  shutdownGraceMs?: number;
  heartbeatMs?: number;
  /**
   * The largest result event the store takes (the NATS server's max_payload): a step
   * whose outputs, base64-encoded in the event, do not fit fails with OutputTooLarge.
   */
  maxResultBytes?: number;
}

export interface ConfigDefaults {
  stepProgram: string;
  tmpdir: string;
  runnerId: string;
}

export function runnerConfig(env: Env, defaults: ConfigDefaults): RunnerConfig {
  const { natsUrl, prefix } = commonConfig(env);
  const driver = envString(env, "EPHEMERA_RUNNER_DRIVER", "process");
  if (driver !== "process") throw new Error(`EPHEMERA_RUNNER_DRIVER "${driver}" is not available (drivers: process)`);
  const hostEnv: Record<string, string> = {};
  for (const name of ["PATH", "LANG"]) if (env[name]) hostEnv[name] = env[name];
  return {
    natsUrl,
    prefix,
    cluster: envString(env, "EPHEMERA_CLUSTER", "local"),
    concurrency: Math.max(1, envInt(env, "EPHEMERA_RUNNER_CONCURRENCY", 8)),
    driver,
    iocontextAddr: envString(env, "EPHEMERA_IOCONTEXT_ADDR", envString(env, "EPHEMERA_IOCONTEXT_LISTEN", DEFAULT_IOCONTEXT_LISTEN)),
    workdir: envString(env, "EPHEMERA_RUNNER_WORKDIR", join(defaults.tmpdir, "ephemera", prefix)),
    listen: envString(env, "EPHEMERA_RUNNER_LISTEN", DEFAULT_RUNNER_LISTEN),
    runnerId: defaults.runnerId,
    stepProgram: defaults.stepProgram,
    hostEnv,
    shutdownGraceMs: envInt(env, "EPHEMERA_RUNNER_SHUTDOWN_GRACE_MS", 30_000),
  };
}
