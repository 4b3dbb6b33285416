// ephemera's four services as processes on a NATS and a Redis of the test's own (free
// ports, data in a scratch directory under /var/tmp, outside the steps' private /tmp),
// under a fresh prefix: what a test needs that restarts, reconfigures or searches them.
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { ephAt, type Eph } from "./eph.js";
import { startOwnNats, startOwnRedis, type OwnServer } from "./own-servers.js";
import { uniquePrefix } from "./servers.js";
import { Services } from "./services.js";
import { freePort } from "./stack.js";

export interface OwnStack {
  scratch: string;
  prefix: string;
  nats: OwnServer & { url: string };
  redis: OwnServer & { url: string };
  services: Services;
  eph: Eph;
  /** host:port of the IO context. */
  ioAddress: string;
  /** Every variable the services were started with. */
  env: Record<string, string>;
  /** Stops the services, then Redis and NATS, and removes the scratch directory. */
  stop(): Promise<void>;
}

export interface OwnStackOptions {
  /** More nats-server flags and redis-server directives (`--user …`, `-c file`). */
  natsFlags?: (scratch: string) => string[];
  redisFlags?: string[];
  /** More service variables (credentials, log level). */
  env?: Record<string, string>;
}

export async function startOwnStack(tag: string, options: OwnStackOptions = {}): Promise<OwnStack> {
  const scratch = mkdtempSync(`/var/tmp/ephemera-${tag}-`);
  const started: Array<{ stop(): Promise<unknown> }> = [];
  try {
    const nats = await startOwnNats(join(scratch, "nats"), options.natsFlags?.(scratch) ?? []);
    started.push(nats);
    const redis = await startOwnRedis(join(scratch, "redis"), options.redisFlags ?? []);
    started.push(redis);
    const [apiPort, ioPort] = [await freePort(), await freePort()];
    const prefix = uniquePrefix(tag);
    const ioAddress = `127.0.0.1:${ioPort}`;
    const env = {
      NATS_URL: nats.url, REDIS_URL: redis.url, EPHEMERA_PREFIX: prefix,
      EPHEMERA_API_LISTEN: `127.0.0.1:${apiPort}`, EPHEMERA_IOCONTEXT_LISTEN: ioAddress, EPHEMERA_IOCONTEXT_ADDR: ioAddress,
      EPHEMERA_RUNNER_WORKDIR: join(scratch, "runner"),
      ...options.env,
    };
    const services = await Services.start({ env });
    return {
      scratch, prefix, nats, redis, services, eph: ephAt(services.api), ioAddress, env,
      stop: async () => {
        await services.stop();
        await redis.stop();
        await nats.stop();
        rmSync(scratch, { recursive: true, force: true });
      },
    };
  } catch (err) {
    for (const s of started.reverse()) await s.stop().catch(() => undefined);
    rmSync(scratch, { recursive: true, force: true });
    throw err;
  }
}
