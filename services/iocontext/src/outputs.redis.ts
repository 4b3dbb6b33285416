// The Redis output store: one hash per run (`<prefix>:io:<runId>`, output name → bytes)
// and one set per sandbox incarnation listing its runs (`<prefix>:io-runs:<routingKey>`).
import { ReplyError, type Redis } from "ioredis";
import { UnavailableError, errorMessage } from "@ephemera/kit";
import type { OutputStore, OutputValue } from "./outputs.js";
import type { RedisHealth } from "./redis-health.js";

export class RedisOutputStore implements OutputStore {
  /** With `health`, a call while Redis is known to be down is refused at once rather than waiting for it. */
  constructor(private readonly redis: Redis, private readonly prefix: string, private readonly health?: RedisHealth) {}

  readonly runKey = (runId: string) => `${this.prefix}:io:${runId}`;
  readonly sandboxKey = (routingKey: string) => `${this.prefix}:io-runs:${routingKey}`;

  async read(runId: string): Promise<Map<string, Buffer>> {
    const hash = await this.guard(() => this.redis.hgetallBuffer(this.runKey(runId)), `read outputs of ${runId}`);
    return new Map(Object.entries(hash));
  }

  async write(runId: string, routingKey: string, outputs: OutputValue[]): Promise<void> {
    if (outputs.length === 0) return;
    const fields = outputs.flatMap((o) => [o.name, o.value]);
    const what = `store outputs of ${runId}`;
    // One transaction: a run is never listed under its sandbox without its values, or the reverse.
    const results = await this.guard(
      () => this.redis.multi().hset(this.runKey(runId), ...fields).sadd(this.sandboxKey(routingKey), runId).exec(),
      what,
    );
    const failed = results ? results.find(([err]) => err)?.[0] : new Error("transaction aborted");
    if (failed) throw unavailable(what, failed);
  }

  async dropSandbox(routingKey: string): Promise<number> {
    const runs = await this.guard(() => this.redis.smembers(this.sandboxKey(routingKey)), `list runs of ${routingKey}`);
    await this.guard(() => this.redis.del(...runs.map(this.runKey), this.sandboxKey(routingKey)), `drop outputs of ${routingKey}`);
    return runs.length;
  }

  private async guard<T>(fn: () => Promise<T>, what: string): Promise<T> {
    try {
      return await (this.health ? this.health.call(fn) : fn());
    } catch (err) {
      throw unavailable(what, err);
    }
  }
}

/**
 * ioredis attaches the failed command, arguments included, to some errors (`err.command`):
 * those arguments are output values, which must never reach a log. The cause kept is a
 * copy with the message only, and a server reply (which may echo arguments) is named, not quoted.
 */
function unavailable(what: string, err: unknown): UnavailableError {
  const name = err instanceof Error ? err.name : "Error";
  const detail = err instanceof ReplyError ? `${name} from the server` : errorMessage(err);
  const cause = new Error(detail);
  cause.name = name;
  return new UnavailableError(`redis: cannot ${what}: ${detail}`, { cause });
}
