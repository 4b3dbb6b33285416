// The sandbox service's timers: every replica keeps the TTL index, and only the holder of
// the timers' lease fires it (and applies the job rules, through onAcquired and onLost).
import { encode } from "@ephemera/events";
import { InMemoryLeaseStore, Lease, execute, leaseHolderId, type EventStore, type LeaseStore, type Projection } from "@ephemera/eventstore";
import { DueIndex, type Logger } from "@ephemera/kit";
import { decideSandbox, scheduledDeleteTime } from "../sandbox/decide.js";
import type { SandboxState } from "../sandbox/state.js";

/** The lease whose holder fires the sandbox service's timers. */
export const SANDBOX_TIMERS_LEASE = "sandbox-timers";

export interface TimerDeps {
  store: EventStore;
  sandboxes: Projection<SandboxState>;
  logger: Logger;
  now: () => number;
  /** Where the replicas hold the lease; absent: a store of this process's own, so it is the only holder. */
  leases?: LeaseStore;
  /** How long the lease lasts unless renewed (default 10 s). */
  leaseTtlMs?: number;
  /** Called when this replica takes the lease (after the TTL index is armed). */
  onAcquired: () => void;
  /** Called when this replica stops holding it (after the TTL index is paused). */
  onLost: () => void;
}

export class SandboxTimers {
  private readonly ttl: DueIndex;
  private lease?: Lease;

  constructor(private readonly deps: TimerDeps) {
    this.ttl = new DueIndex((names, now) => this.expire(names, now), deps.now);
    // Every replica keeps the index; only the lease's holder fires it (start()).
    this.ttl.pause();
  }

  /** Whether this replica fires the timers now (holds their lease). */
  get held(): boolean {
    return this.lease?.held ?? false;
  }

  /** Keeps sandbox `name`'s TTL to its state after a change. */
  track(name: string): void {
    const state = this.deps.sandboxes.get(name)?.state;
    this.ttl.set(name, state?.status === "active" ? scheduledDeleteTime(state) : undefined);
  }

  start(): void {
    this.lease = Lease.hold(this.deps.leases ?? new InMemoryLeaseStore(), {
      name: SANDBOX_TIMERS_LEASE, holder: leaseHolderId("sandbox"), ttlMs: this.deps.leaseTtlMs ?? 10_000, logger: this.deps.logger,
      // The new holder fires what came due meanwhile at once.
      onAcquired: () => { this.ttl.arm(); this.deps.onAcquired(); },
      onLost: () => { this.ttl.pause(); this.deps.onLost(); },
    });
  }

  async stop(): Promise<void> {
    this.ttl.stop();
    await this.lease?.stop();
  }

  private async expire(names: string[], now: number): Promise<void> {
    for (const name of names) {
      if (!this.held) return;
      try {
        await execute(this.deps.store, this.deps.sandboxes, name, (state) => decideSandbox({ kind: "expire", now }, state).map(encode),
          { source: "sandbox", command: "expire", actor: "ttl" });
        this.deps.logger.info({ sandbox: name }, "sandbox TTL expired; deleting it");
      } catch (err) {
        this.deps.logger.warn({ err, sandbox: name }, "TTL expiry failed; will try again");
      }
    }
  }
}
