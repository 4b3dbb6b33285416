// The in-memory twin of the Redis output store: same contract (outputs-contract.testkit.ts),
// no I/O, and a switch that makes it unavailable the way Redis can be.
import { UnavailableError } from "@ephemera/kit";
import type { OutputStore, OutputValue } from "./outputs.js";

export class InMemoryOutputStore implements OutputStore {
  private readonly runs = new Map<string, Map<string, Buffer>>();
  private readonly sandboxes = new Map<string, Set<string>>();
  private available = true;

  /** While false, every call rejects with UnavailableError, as when Redis is down. */
  setAvailable(available: boolean): void {
    this.available = available;
  }

  async read(runId: string): Promise<Map<string, Buffer>> {
    this.check(`read outputs of ${runId}`);
    // Copies both ways: like Redis, the store never shares a buffer with its callers.
    return new Map([...(this.runs.get(runId) ?? [])].map(([name, value]) => [name, Buffer.from(value)]));
  }

  async write(runId: string, routingKey: string, outputs: OutputValue[]): Promise<void> {
    this.check(`store outputs of ${runId}`);
    if (outputs.length === 0) return;
    const run = this.runs.get(runId) ?? new Map<string, Buffer>();
    for (const o of outputs) run.set(o.name, Buffer.from(o.value));
    this.runs.set(runId, run);
    const runs = this.sandboxes.get(routingKey) ?? new Set<string>();
    this.sandboxes.set(routingKey, runs.add(runId));
  }

  async dropSandbox(routingKey: string): Promise<number> {
    this.check(`drop outputs of ${routingKey}`);
    const runs = this.sandboxes.get(routingKey) ?? new Set<string>();
    for (const runId of runs) this.runs.delete(runId);
    this.sandboxes.delete(routingKey);
    return runs.size;
  }

  private check(what: string): void {
    if (!this.available) throw new UnavailableError(`output store: cannot ${what}: unavailable`);
  }
}
