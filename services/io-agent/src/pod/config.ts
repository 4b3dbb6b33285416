// The agent's configuration, from the environment the Kubernetes driver gives its containers.
// Every missing or unreadable setting is named at once; the token itself never is printed.
import { readFileSync } from "node:fs";
import type { ClientTls, Env } from "@ephemera/kit";
import { clientTlsFromEnv, envInt, errorMessage } from "@ephemera/kit";
import { DEFAULT_RETRY, type RetryPolicy } from "../retry.js";
import { DEFAULT_AGENT_DIR } from "./layout.js";

export interface AgentConfig {
  runId: string;
  token: string;
  /** host:port of the IOContext service. */
  iocontext: string;
  /** EPHEMERA_TLS, EPHEMERA_TLS_CA, … as for every ephemera client; absent: plaintext. */
  tls?: ClientTls;
  agentDir: string;
  /** How long calls to the IO context are retried while it is unavailable. */
  retry: RetryPolicy;
  /** The sidecar gives up waiting for the script's exit code after this long. */
  waitTimeoutMs: number;
  /** A waiting sidecar says so on stderr this often. */
  waitNoticeMs: number;
  /** How often the sidecar looks for the exit code. */
  pollMs: number;
  /** EPHEMERA_TERMINATION_MESSAGE_PATH: where the report's summary goes for the pod's status (the Kubernetes driver sets it). */
  terminationMessagePath?: string;
}

export class ConfigError extends Error {
  override readonly name = "ConfigError";
}
export const isConfigError = (e: unknown): e is ConfigError => e instanceof ConfigError;

const SIX_HOURS_MS = 6 * 3600_000;

export function agentConfig(env: Env, readText: (path: string) => string = (p) => readFileSync(p, "utf8")): AgentConfig {
  const { problems, required, guarded } = settingsOf(env);
  const runId = required("EPHEMERA_RUN_ID");
  const iocontext = required("EPHEMERA_IOCONTEXT");
  const token = guarded(() => readToken(env, readText), "");
  const tls = guarded(() => clientTlsFromEnv(env), undefined);
  const retryMs = guarded(() => envInt(env, "EPHEMERA_IO_RETRY_MS", DEFAULT_RETRY.totalMs), DEFAULT_RETRY.totalMs);
  const waitTimeoutMs = guarded(() => envInt(env, "EPHEMERA_WAIT_TIMEOUT_MS", SIX_HOURS_MS), SIX_HOURS_MS);
  const waitNoticeMs = guarded(() => envInt(env, "EPHEMERA_WAIT_NOTICE_MS", 30_000), 30_000);
  if (problems.length) throw new ConfigError(`ephemera-agent: ${problems.join("; ")}`);
  return {
    runId, token, iocontext, ...(tls ? { tls } : {}),
    agentDir: env["EPHEMERA_AGENT_DIR"] || DEFAULT_AGENT_DIR,
    retry: { ...DEFAULT_RETRY, totalMs: retryMs },
    waitTimeoutMs,
    waitNoticeMs: Math.max(1, waitNoticeMs),
    // On the path between a script's end and its outputs: a look costs a failed open().
    pollMs: 20,
    ...(env["EPHEMERA_TERMINATION_MESSAGE_PATH"] ? { terminationMessagePath: env["EPHEMERA_TERMINATION_MESSAGE_PATH"] } : {}),
  };
}

/**
 * Reading an agent's settings, every problem gathered before one ConfigError says them all:
 * `required` notes an unset variable, `guarded` a reader that threw (and gives its fallback).
 */
export function settingsOf(env: Env) {
  const problems: string[] = [];
  const required = (name: string) => {
    const v = env[name] ?? "";
    if (!v) problems.push(`${name} is not set`);
    return v;
  };
  const guarded = <T>(read: () => T, fallback: T): T => {
    try {
      return read();
    } catch (err) {
      problems.push(errorMessage(err));
      return fallback;
    }
  };
  return { problems, required, guarded };
}

/** The token in `name`, or in the file `<name>_FILE` names (a mounted Secret; one trailing newline dropped). */
export function readToken(env: Env, readText: (path: string) => string, name = "EPHEMERA_TOKEN"): string {
  const fileVar = `${name}_FILE`;
  const inline = env[name] ?? "";
  const file = env[fileVar] ?? "";
  if (inline && file) throw new Error(`${name} and ${fileVar} are both set; set one`);
  if (inline) return inline;
  if (!file) throw new Error(`${name} or ${fileVar} is not set`);
  let text: string;
  try {
    text = readText(file);
  } catch (err) {
    throw new Error(`${fileVar}: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? errorMessage(err)}`, { cause: err });
  }
  const token = text.replace(/\r?\n$/, "");
  if (!token) throw new Error(`${fileVar}: ${file} is empty`);
  return token;
}
