// Leases: which replica does the work that must be done by one (timers, the fork reconciler
// of a cluster, clean-ups). A lease is one key holding {holder, until}, changed only by
// compare-and-set on the key's revision: on NATS a JetStream KV bucket (`<prefix>_leases`),
// in tests an in-memory twin that passes the same contract.
//
// NATS 2.9 has no per-key TTL, so expiry is a time written in the record. Clock assumption:
// the clocks of the replicas agree within `maxSkewMs` (NTP keeps them within milliseconds).
// A contender takes the lease once `until` has passed by its clock; the holder stops acting
// `maxSkewMs` before `until` by its own clock, measured from when it sent the renewal, so
// the two never act at once while the skew stays within that bound.
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import type { NatsConnection } from "@nats-io/nats-core";
import { JetStreamApiError, jetstream } from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import { ConcurrencyError, UnavailableError, errorMessage, type Logger } from "@ephemera/kit";

/** What a lease key holds. An empty holder is a released lease. */
export interface LeaseRecord {
  holder: string;
  /** Epoch milliseconds: the holder's claim ends then unless renewed. */
  until: number;
}

export interface LeaseEntry {
  record: LeaseRecord | undefined;
  /** The key's revision (0: never written): what a write must name to replace it. */
  revision: number;
}

/** The store of lease keys: reads, and writes that succeed only over the revision read. */
export interface LeaseStore {
  read(name: string): Promise<LeaseEntry>;
  /** Writes `record` if the key is still at `revision` (0: absent); resolves to the new revision, ConcurrencyError otherwise. */
  write(name: string, record: LeaseRecord, revision: number): Promise<number>;
}

/** A process-unique holder name: host, pid and a random part (a restarted process is a new holder). */
export const leaseHolderId = (role: string) => `${role}-${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`;

export interface LeaseOptions {
  /** The key, e.g. `sandbox-timers` or `forks-<cluster>`: letters, digits, `-` and `_`. */
  name: string;
  holder: string;
  /** How long a claim lasts unless renewed; renewed every ttl/3. */
  ttlMs: number;
  /** How far the replicas' clocks may disagree (default ttl/10, at most 1 s). */
  maxSkewMs?: number;
  /** Called when this holder takes the lease: start acting (fire what is due). */
  onAcquired?: () => void;
  /** Called when it stops holding it (not renewed in time, or taken): stop acting. */
  onLost?: () => void;
  logger?: Logger;
  now?: () => number;
}

const LEASE_NAME = /^[A-Za-z0-9_-]{1,200}$/;

/**
 * One process's part in a lease: it contends until it holds it, renews it every ttl/3, and
 * stops acting (onLost) when it cannot renew before its claim ends. `stop()` releases it
 * so another replica takes over at once.
 */
export class Lease {
  private isHeld = false;
  /** By this process's clock, the last moment its claim may be acted on (its end less the skew). */
  private actUntil = 0;
  private revision = 0;
  private stopped = false;
  private timer?: NodeJS.Timeout;
  private lossTimer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private readonly now: () => number;
  private readonly maxSkewMs: number;

  private constructor(private readonly store: LeaseStore, private readonly options: LeaseOptions) {
    if (!LEASE_NAME.test(options.name)) throw new Error(`lease name "${options.name}" must be 1-200 letters, digits, '-' or '_'`);
    if (!(options.ttlMs >= 30)) throw new Error(`lease ttlMs must be at least 30 ms (got ${options.ttlMs})`);
    this.now = options.now ?? Date.now;
    this.maxSkewMs = options.maxSkewMs ?? Math.min(1000, options.ttlMs / 10);
  }

  /** Starts contending for the lease `options.name`. */
  static hold(store: LeaseStore, options: LeaseOptions): Lease {
    const lease = new Lease(store, options);
    lease.schedule(0);
    return lease;
  }

  get name(): string {
    return this.options.name;
  }

  /**
   * True while this holder's claim is current: act only then. It reads the clock as well as
   * the loss timer, so a timer that fires late (a busy event loop) never leaves a holder
   * acting past its claim.
   */
  get held(): boolean {
    return this.isHeld && this.now() < this.actUntil;
  }

  /** Stops contending; a held lease is released (written expired) so a contender takes it at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
    if (!this.isHeld) return;
    this.drop();
    try {
      await this.store.write(this.options.name, { holder: "", until: 0 }, this.revision);
    } catch (err) {
      // Taken meanwhile, or the store is away: it expires on its own.
      this.options.logger?.debug({ err, lease: this.options.name }, "lease not released; it expires on its own");
    }
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => { this.running = this.tick(); }, ms);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    const { name, holder, ttlMs } = this.options;
    const sent = this.now();
    let next = ttlMs / 3;
    try {
      if (this.isHeld) {
        // Renewal: over the revision this holder last wrote; a conflict means it was taken.
        this.claimed(await this.store.write(name, { holder, until: sent + ttlMs }, this.revision), sent);
      } else {
        const { record, revision } = await this.store.read(name);
        if (!record || record.until <= sent) {
          this.claimed(await this.store.write(name, { holder, until: sent + ttlMs }, revision), sent);
        } else {
          // Held by another: look again when its claim would end.
          next = Math.min(next, record.until - sent + 1);
        }
      }
    } catch (err) {
      if (err instanceof ConcurrencyError) {
        if (this.isHeld) {
          this.options.logger?.warn({ lease: name }, "lease taken by another holder; no longer acting");
          this.lose();
        }
      } else {
        // The store is away: a holder keeps acting until its claim ends (the loss timer), then stops.
        this.options.logger?.debug({ err, lease: name }, "lease store unavailable; trying again");
      }
    }
    this.schedule(Math.max(10, next));
  }

  private claimed(revision: number, sent: number): void {
    if (this.stopped && !this.isHeld) {
      // Taken while stopping: stop() releases it.
      this.revision = revision;
      this.isHeld = true;
      return;
    }
    this.revision = revision;
    clearTimeout(this.lossTimer);
    this.actUntil = sent + this.options.ttlMs - this.maxSkewMs;
    const left = this.actUntil - this.now();
    if (left <= 0) {
      // The answer came too late to act on: the claim is as good as gone.
      if (this.isHeld) this.lose();
      return;
    }
    this.lossTimer = setTimeout(() => this.lose(), left);
    this.lossTimer.unref();
    if (!this.isHeld) {
      this.isHeld = true;
      this.options.logger?.info({ lease: this.options.name, holder: this.options.holder }, "lease acquired; acting");
      this.options.onAcquired?.();
    }
  }

  private lose(): void {
    if (!this.isHeld) return;
    this.drop();
    this.options.onLost?.();
  }

  private drop(): void {
    this.isHeld = false;
    clearTimeout(this.lossTimer);
  }
}

/** The in-memory twin of the lease bucket; `setAvailable(false)` makes every call fail as NATS down would. */
export class InMemoryLeaseStore implements LeaseStore {
  private readonly keys = new Map<string, { record: LeaseRecord; revision: number }>();
  private sequence = 0;
  private available = true;

  setAvailable(available: boolean): void {
    this.available = available;
  }

  async read(name: string): Promise<LeaseEntry> {
    this.check();
    const entry = this.keys.get(name);
    return { record: entry && { ...entry.record }, revision: entry?.revision ?? 0 };
  }

  async write(name: string, record: LeaseRecord, revision: number): Promise<number> {
    this.check();
    if ((this.keys.get(name)?.revision ?? 0) !== revision) throw new ConcurrencyError(`lease ${name}`, revision);
    const next = ++this.sequence;
    this.keys.set(name, { record: { ...record }, revision: next });
    return next;
  }

  private check(): void {
    if (!this.available) throw new UnavailableError("lease store: unavailable");
  }
}

export const leaseBucket = (prefix: string) => `${prefix}_leases`;

const WRONG_LAST_SEQUENCE = 10071;

/**
 * Leases in a JetStream KV bucket: a key's revision is its stream sequence, and KV's
 * create/update are the compare-and-set (Nats-Expected-Last-Subject-Sequence) a lease needs.
 */
export class JetStreamLeaseStore implements LeaseStore {
  private constructor(private readonly kv: KV, private readonly bucket: string) {}

  /** Opens (creating it if needed) the bucket of `prefix`; `replicas` as for the streams (EPHEMERA_STREAM_REPLICAS). */
  static async open(nc: NatsConnection, prefix: string, { timeoutMs = 5_000, replicas = 1 }: { timeoutMs?: number; replicas?: number } = {}): Promise<JetStreamLeaseStore> {
    const bucket = leaseBucket(prefix);
    try {
      const kvm = new Kvm(jetstream(nc, { timeout: timeoutMs }));
      return new JetStreamLeaseStore(await kvm.create(bucket, { history: 1, replicas, description: "ephemera: leases of the single roles" }), bucket);
    } catch (err) {
      throw new UnavailableError(`cannot open the lease bucket ${bucket}: ${errorMessage(err)}`, { cause: err });
    }
  }

  async read(name: string): Promise<LeaseEntry> {
    try {
      const e = await this.kv.get(name);
      if (!e) return { record: undefined, revision: 0 };
      return { record: e.operation === "PUT" ? e.json<LeaseRecord>() : undefined, revision: e.revision };
    } catch (err) {
      throw new UnavailableError(`lease bucket ${this.bucket}: cannot read ${name}: ${errorMessage(err)}`, { cause: err });
    }
  }

  async write(name: string, record: LeaseRecord, revision: number): Promise<number> {
    const data = JSON.stringify(record);
    try {
      return revision === 0 ? await this.kv.create(name, data) : await this.kv.update(name, data, revision);
    } catch (err) {
      if (err instanceof JetStreamApiError && err.code === WRONG_LAST_SEQUENCE) throw new ConcurrencyError(`lease ${name}`, revision, { cause: err });
      throw new UnavailableError(`lease bucket ${this.bucket}: cannot write ${name}: ${errorMessage(err)}`, { cause: err });
    }
  }
}

/** What a single role does when its replica takes the lease, and when it loses it. */
export interface Role {
  begin(): Promise<void>;
  end(): Promise<void>;
}

/**
 * A role that one replica at a time plays (a cluster's fork reconciler): begun when this
 * process takes the lease, ended when it loses it or stops, one transition after another.
 * Without a lease store the process is the only one: start() begins it at once.
 */
export class LeasedRole {
  private lease?: Lease;
  private transitions = Promise.resolve();
  private playing = false;

  constructor(
    private readonly store: LeaseStore | undefined,
    private readonly options: Omit<LeaseOptions, "onAcquired" | "onLost">,
    private readonly role: Role,
  ) {}

  /** Whether this process plays the role now. */
  get active(): boolean {
    return this.playing;
  }

  async start(): Promise<void> {
    if (!this.store) {
      await this.begin();
      return;
    }
    this.lease = Lease.hold(this.store, { ...this.options, onAcquired: () => this.queue(() => this.begin()), onLost: () => this.queue(() => this.end()) });
  }

  /** Ends the role and releases the lease, so another replica takes it over at once. */
  async stop(): Promise<void> {
    await this.lease?.stop();
    this.queue(() => this.end());
    await this.transitions;
  }

  private queue(step: () => Promise<void>): void {
    this.transitions = this.transitions.then(step).catch((err: unknown) => {
      this.options.logger?.error({ err, lease: this.options.name }, "a single role could not change hands cleanly");
    });
  }

  private async begin(): Promise<void> {
    if (this.playing) return;
    this.playing = true;
    await this.role.begin();
  }

  private async end(): Promise<void> {
    if (!this.playing) return;
    this.playing = false;
    await this.role.end();
  }
}
