// Reading configuration from environment variables, with the defaults of the design.

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

export interface CommonConfig {
  natsUrl: string;
  redisUrl: string;
  prefix: string;
}

const PREFIX = /^[a-zA-Z][a-zA-Z0-9_-]{0,31}$/;

export function commonConfig(env: Env): CommonConfig {
  const prefix = envString(env, "EPHEMERA_PREFIX", "eph");
  if (!PREFIX.test(prefix)) {
    throw new Error(`EPHEMERA_PREFIX must match ${PREFIX} (it names streams, subjects and keys), got "${prefix}"`);
  }
  return {
    natsUrl: envString(env, "NATS_URL", "nats://127.0.0.1:4222"),
    redisUrl: envString(env, "REDIS_URL", "redis://127.0.0.1:6379"),
    prefix,
  };
}

export const DEFAULT_API_LISTEN = "127.0.0.1:7400";
export const DEFAULT_IOCONTEXT_LISTEN = "127.0.0.1:7401";
