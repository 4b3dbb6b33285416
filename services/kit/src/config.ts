// Reading configuration from environment variables, with the defaults of the design.
import { requireDuration, type DurationLimits } from "./duration.js";
import type { Logger } from "./logger.js";

export type Env = Record<string, string | undefined>;

export function envString(env: Env, name: string, fallback: string): string {
  const v = env[name];
  return v === undefined || v === "" ? fallback : v;
}

export function envInt(env: Env, name: string, fallback: number): number {
  const v = env[name];
  if (v === undefined || v === "") return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got "${v}"`);
  return n;
}

export function envBool(env: Env, name: string, fallback: boolean): boolean {
  const v = env[name]?.toLowerCase();
  if (v === undefined || v === "") return fallback;
  if (["true", "1", "yes"].includes(v)) return true;
  if (["false", "0", "no"].includes(v)) return false;
  throw new Error(`${name} must be true or false, got "${env[name]}"`);
}

/**
 * A duration variable (`EPHEMERA_LOG_RETENTION=30d`), read as files and flags read theirs;
 * spaces around it, which an env file can leave, are dropped.
 */
export function envDuration(env: Env, name: string, fallback: string, limits: DurationLimits): number {
  return requireDuration(name, envString(env, name, fallback).trim(), limits);
}

export interface CommonConfig {
  natsUrl: string;
  /** How the services authenticate to NATS; absent = no credentials. */
  natsAuth?: NatsAuth;
  redisUrl: string;
  /** Redis ACL user and password (they may also be in REDIS_URL); absent = none. */
  redisAuth?: RedisAuth;
  prefix: string;
  /** EPHEMERA_STREAM_REPLICAS: replicas of each stream and bucket ephemera creates (1; 3 on a three-server NATS cluster). */
  streamReplicas: number;
}

/**
 * One way of authenticating to NATS, from the environment (the names the nats CLI reads):
 * NATS_USER + NATS_PASSWORD, NATS_TOKEN, NATS_NKEY (a file holding an nkey seed) or
 * NATS_CREDS (a user JWT and seed file). Values are secrets: never logged.
 */
export type NatsAuth =
  | { kind: "user"; user: string; pass: string }
  | { kind: "token"; token: string }
  | { kind: "nkey"; seedFile: string }
  | { kind: "creds"; credsFile: string };

export interface RedisAuth {
  username?: string;
  password: string;
}

export function natsAuth(env: Env): NatsAuth | undefined {
  const set = (name: string) => envString(env, name, "") !== "";
  const ways = [
    set("NATS_USER") || set("NATS_PASSWORD") ? "NATS_USER/NATS_PASSWORD" : undefined,
    set("NATS_TOKEN") ? "NATS_TOKEN" : undefined,
    set("NATS_NKEY") ? "NATS_NKEY" : undefined,
    set("NATS_CREDS") ? "NATS_CREDS" : undefined,
  ].filter((w): w is string => w !== undefined);
  if (ways.length > 1) throw new Error(`NATS credentials: set one of NATS_USER/NATS_PASSWORD, NATS_TOKEN, NATS_NKEY, NATS_CREDS, not ${ways.join(" and ")}`);
  if (set("NATS_USER") !== set("NATS_PASSWORD")) throw new Error("NATS credentials: NATS_USER and NATS_PASSWORD go together; one of them is empty");
  if (set("NATS_USER")) return { kind: "user", user: env["NATS_USER"]!, pass: env["NATS_PASSWORD"]! };
  if (set("NATS_TOKEN")) return { kind: "token", token: env["NATS_TOKEN"]! };
  if (set("NATS_NKEY")) return { kind: "nkey", seedFile: env["NATS_NKEY"]! };
  if (set("NATS_CREDS")) return { kind: "creds", credsFile: env["NATS_CREDS"]! };
  return undefined;
}

export function redisAuth(env: Env): RedisAuth | undefined {
  const username = envString(env, "REDIS_USERNAME", "");
  const password = envString(env, "REDIS_PASSWORD", "");
  if (username && !password) throw new Error("Redis credentials: REDIS_USERNAME is set but REDIS_PASSWORD is empty");
  if (!password) return undefined;
  return { ...(username ? { username } : {}), password };
}

/** A URL as it may be logged: any user and password in it replaced. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (!u.username && !u.password) return url;
    u.username = u.username ? "***" : "";
    u.password = u.password ? "***" : "";
    return u.toString();
  } catch {
    return url.replace(/\/\/[^@/]*@/, "//***@");
  }
}

const PREFIX = /^[a-zA-Z][a-zA-Z0-9_-]{0,31}$/;

export function commonConfig(env: Env): CommonConfig {
  const prefix = envString(env, "EPHEMERA_PREFIX", "eph");
  if (!PREFIX.test(prefix)) {
    throw new Error(`EPHEMERA_PREFIX must match ${PREFIX} (it names streams, subjects and keys), got "${prefix}"`);
  }
  const nats = natsAuth(env);
  const redis = redisAuth(env);
  return {
    natsUrl: envString(env, "NATS_URL", "nats://127.0.0.1:4222"),
    ...(nats ? { natsAuth: nats } : {}),
    redisUrl: envString(env, "REDIS_URL", "redis://127.0.0.1:6379"),
    ...(redis ? { redisAuth: redis } : {}),
    prefix,
    streamReplicas: streamReplicas(env),
  };
}

/** 1 to 5, as JetStream allows; only a stream's creation reads it (an existing stream keeps its replicas). */
function streamReplicas(env: Env): number {
  const n = envInt(env, "EPHEMERA_STREAM_REPLICAS", 1);
  if (!(n >= 1 && n <= 5)) throw new Error(`EPHEMERA_STREAM_REPLICAS must be 1 to 5 (JetStream's range), got ${env["EPHEMERA_STREAM_REPLICAS"]}`);
  return n;
}

export const DEFAULT_API_LISTEN = "127.0.0.1:7400";
/** The Routes API, gRPC and HTTP, where Signadot's route-server clients look for it. */
export const DEFAULT_ROUTES_LISTEN = "127.0.0.1:7777";
export const DEFAULT_ROUTES_HTTP_LISTEN = "127.0.0.1:7778";
export const DEFAULT_IOCONTEXT_LISTEN = "127.0.0.1:7401";
/** The preview gateway: serves sandboxes' endpoint URLs. */
export const DEFAULT_GATEWAY_LISTEN = "127.0.0.1:7780";
/** The JobAgent server of the sandbox service: the job runner groups' pods take their jobs there. */
export const DEFAULT_JOBS_LISTEN = "127.0.0.1:7779";

/** A service's configuration, or its refusal logged (fatal) and exit 1: a bad setting stops a service at once, said plainly. */
export function configured<T>(logger: Logger, service: string, read: () => T): T {
  try {
    return read();
  } catch (err) {
    logger.fatal({ err }, `${service} configuration is invalid`);
    process.exit(1);
  }
}
