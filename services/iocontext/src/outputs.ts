// Step outputs in Redis: one hash per run (`<prefix>:io:<runId>`, output name → bytes)
// and one set per sandbox incarnation listing its runs, so they can be dropped together.
// Redis is a cache of the journal: the values also live in `steprun.succeeded` events.
import type { Redis } from "ioredis";
import type * as pb from "@ephemera/proto";
import { UnavailableError } from "@ephemera/kit";

export class OutputStore {
  constructor(private readonly redis: Redis, private readonly prefix: string) {}

  runKey = (runId: string) => `${this.prefix}:io:${runId}`;
  sandboxKey = (routingKey: string) => `${this.prefix}:io-runs:${routingKey}`;

  async read(runId: string): Promise<Map<string, Buffer>> {
    const hash = await this.guard(() => this.redis.hgetallBuffer(this.runKey(runId)), `read outputs of ${runId}`);
    return new Map(Object.entries(hash));
  }

  async write(runId: string, routingKey: string, outputs: pb.OutputValue[]): Promise<void> {
    if (outputs.length === 0) return;
    const fields = outputs.flatMap((o) => [o.name, o.value]);
    const results = await this.guard(
      () => this.redis.multi().hset(this.runKey(runId), ...fields).sadd(this.sandboxKey(routingKey), runId).exec(),
      `store outputs of ${runId}`,
    );
    const failed = results?.find(([err]) => err)?.[0];
    if (!results || failed) throw new UnavailableError(`redis: cannot store outputs of ${runId}`, { cause: failed });
  }

  /** Drops every run of a sandbox incarnation; returns how many run keys went. */
  async dropSandbox(routingKey: string): Promise<number> {
    const runs = await this.guard(() => this.redis.smembers(this.sandboxKey(routingKey)), `list runs of ${routingKey}`);
    await this.guard(() => this.redis.del(...runs.map(this.runKey), this.sandboxKey(routingKey)), `drop outputs of ${routingKey}`);
    return runs.length;
  }

  private async guard<T>(fn: () => Promise<T>, what: string): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw new UnavailableError(`redis: cannot ${what}`, { cause: err });
    }
  }
}
