// The job agent's configuration, from the environment the runner gives a job runner group's
// pod (docs/jobs.md, "Pods"). Every missing or unreadable setting is named at once; the
// token itself never is printed.
import { readFileSync } from "node:fs";
import type { ClientTls, Env } from "@ephemera/kit";
import { clientTlsFromEnv, envInt } from "@ephemera/kit";
import { ConfigError, readToken, settingsOf } from "../pod/config.js";

export interface JobAgentConfig {
  /** host:port of the JobAgent service (EPHEMERA_POD_JOBS). */
  jobs: string;
  /** The pod's capability token (EPHEMERA_POD_TOKEN, or the file EPHEMERA_POD_TOKEN_FILE names). */
  token: string;
  /** The runner group (EPHEMERA_JOB_GROUP) and this pod (EPHEMERA_POD_NAME), as the token names them. */
  group: string;
  pod: string;
  tls?: ClientTls;
  /** After SIGTERM, how long a stopped job has before SIGKILL (EPHEMERA_JOB_KILL_GRACE_MS, default 5 s). */
  killGraceMs: number;
  /** Bounds of the backoff between two Take attempts while the service is away. */
  reconnect: { initialDelayMs: number; maxDelayMs: number };
  /** How long Output, PutArtifact and Finish are retried while the service is unavailable. */
  retryMs: number;
}

/** Variables of the agent's own that a job's process does not get (the token above all). */
export const AGENT_ONLY_ENV = ["EPHEMERA_POD_TOKEN", "EPHEMERA_POD_TOKEN_FILE"];

export function jobAgentConfig(env: Env, readText: (path: string) => string = (p) => readFileSync(p, "utf8")): JobAgentConfig {
  const { problems, required, guarded } = settingsOf(env);
  const jobs = required("EPHEMERA_POD_JOBS");
  const group = required("EPHEMERA_JOB_GROUP");
  const pod = required("EPHEMERA_POD_NAME");
  const token = guarded(() => readToken(env, readText, "EPHEMERA_POD_TOKEN"), "");
  const tls = guarded(() => clientTlsFromEnv(env), undefined);
  const killGraceMs = guarded(() => envInt(env, "EPHEMERA_JOB_KILL_GRACE_MS", 5000), 5000);
  const initialDelayMs = guarded(() => envInt(env, "EPHEMERA_JOB_RECONNECT_MS", 500), 500);
  const maxDelayMs = guarded(() => envInt(env, "EPHEMERA_JOB_RECONNECT_MAX_MS", 30_000), 30_000);
  const retryMs = guarded(() => envInt(env, "EPHEMERA_IO_RETRY_MS", 60_000), 60_000);
  if (killGraceMs > 9000) problems.push(`EPHEMERA_JOB_KILL_GRACE_MS must be at most 9000 (a cancelled job ends within 10 s), got ${killGraceMs}`);
  if (problems.length) throw new ConfigError(`ephemera-job-agent: ${problems.join("; ")}`);
  return {
    jobs, token, group, pod, ...(tls ? { tls } : {}), killGraceMs,
    reconnect: { initialDelayMs: Math.max(1, initialDelayMs), maxDelayMs: Math.max(initialDelayMs, maxDelayMs) }, retryMs,
  };
}
