// Claims: who is working on something right now (a step run, by run id), held for a while
// and renewed by the holder, so that another process can tell a live holder from a dead one
// without trusting its own disk or a redelivery. On NATS a JetStream KV bucket
// (`<prefix>_claims`, compare-and-set on each key's revision); in tests an in-memory twin
// that passes the same contract.
import type { NatsConnection } from "@nats-io/nats-core";
import { jetstream, JetStreamApiError } from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import { ConflictError, UnavailableError, errorMessage } from "@ephemera/kit";

export interface Claim {
  id: string;
  /** Who holds it (a runner incarnation). */
  holder: string;
  /** Wall-clock time (ms since the epoch) the claim lasts until unless renewed. */
  until: number;
  /** The store's revision of this claim: a renewal or release is refused once another write came after it. */
  revision: number;
  /**
   * What the holder kept with its claim before recording it (a step's result, opaque here):
   * carried over to whoever takes the claim next, so a holder that dies between the end of
   * its work and its record leaves the work done, not to be done again.
   */
  result?: string;
}

export type Acquired =
  | { taken: true; claim: Claim }
  /** Someone else holds a live claim: `claim` is theirs. */
  | { taken: false; claim: Claim };

export interface AcquireOptions {
  /** A live claim of a holder this says is gone (a dead incarnation on this host) is taken like an expired one. */
  holderGone?: (holder: string) => boolean;
}

export interface ClaimStore {
  /** The claim on `id`, live or expired; undefined when there is none. */
  read(id: string): Promise<Claim | undefined>;
  /**
   * Takes `id` for `holder` for `ttlMs`: when nobody holds it, when its claim expired, or
   * when `holder` already holds it. Otherwise the live claim of the other holder comes back.
   */
  acquire(id: string, holder: string, ttlMs: number, options?: AcquireOptions): Promise<Acquired>;
  /**
   * Extends a claim this holder has, keeping `result` with it (default: the claim's own);
   * ClaimLostError when it was taken (or released) since.
   */
  renew(claim: Claim, ttlMs: number, result?: string): Promise<Claim>;
  /** Gives a claim up; nothing happens when it was taken by another since. */
  release(claim: Claim): Promise<void>;
}

/** The claim moved on without its holder (it expired and another took it): the holder's work is no longer its own. */
export class ClaimLostError extends ConflictError {
  constructor(readonly claim: Claim) {
    super(`the claim of ${claim.holder} on ${claim.id} was taken over or released`);
  }
}

export const isClaimLostError = (e: unknown): e is ClaimLostError => e instanceof ClaimLostError;

export const claimsBucket = (prefix: string) => `${prefix}_claims`;

const WRONG_LAST_SEQUENCE = 10071;
/** Claims nobody renewed for a day are gone from the bucket (its max age): a run lasts longer only while renewed. */
const BUCKET_MAX_AGE_MS = 24 * 60 * 60_000;

interface Stored { holder: string; until: number; result?: string }

/** Whether a claim is live at `now`. */
export const isLive = (claim: Pick<Claim, "until">, now: number) => claim.until > now;

export class JetStreamClaimStore implements ClaimStore {
  private constructor(private readonly kv: KV, private readonly now: () => number) {}

  /**
   * Opens (creating it if needed) the bucket of `prefix`. `now` is the wall clock: hosts
   * compare each other's `until`, so their clocks must agree to well within a claim's TTL.
   */
  static async open(
    nc: NatsConnection, prefix: string, { timeoutMs = 5_000, replicas = 1, now = Date.now }: { timeoutMs?: number; replicas?: number; now?: () => number } = {},
  ): Promise<JetStreamClaimStore> {
    try {
      const kvm = new Kvm(jetstream(nc, { timeout: timeoutMs }));
      const kv = await kvm.create(claimsBucket(prefix), { history: 1, ttl: BUCKET_MAX_AGE_MS, replicas, description: "ephemera: who holds each step run" });
      return new JetStreamClaimStore(kv, now);
    } catch (err) {
      throw new UnavailableError(`cannot open the claims bucket ${claimsBucket(prefix)}: ${errorMessage(err)}`, { cause: err });
    }
  }

  async read(id: string): Promise<Claim | undefined> {
    const entry = await this.guard(() => this.kv.get(id), `read the claim on ${id}`);
    if (!entry || entry.operation !== "PUT") return undefined;
    const { holder, until, result } = entry.json<Stored>();
    return { id, holder, until, revision: entry.revision, ...(result !== undefined ? { result } : {}) };
  }

  async acquire(id: string, holder: string, ttlMs: number, options: AcquireOptions = {}): Promise<Acquired> {
    // Most runs were never claimed (or their claim was released): a create alone takes them,
    // one request. A claim there is read, and taken over only when it may be.
    const fresh = { holder, until: this.now() + ttlMs };
    try {
      return { taken: true, claim: { id, ...fresh, revision: await this.write(id, fresh, undefined) } };
    } catch (err) {
      if (!(err instanceof ClaimLostError)) throw err;
    }
    // Two rounds: a conflict means another acquired or renewed in between; the second read sees it.
    for (let round = 0; ; round++) {
      const current = await this.read(id);
      if (current && current.holder !== holder && isLive(current, this.now()) && !options.holderGone?.(current.holder)) {
        return { taken: false, claim: current };
      }
      const until = this.now() + ttlMs;
      // What the last holder kept comes along: the new holder records it instead of redoing the work.
      const kept = current?.result !== undefined ? { result: current.result } : {};
      try {
        const revision = await this.write(id, { holder, until, ...kept }, current?.revision);
        return { taken: true, claim: { id, holder, until, revision, ...kept } };
      } catch (err) {
        if (!(err instanceof ClaimLostError) || round >= 1) throw err;
      }
    }
  }

  async renew(claim: Claim, ttlMs: number, result = claim.result): Promise<Claim> {
    const until = this.now() + ttlMs;
    const kept = result !== undefined ? { result } : {};
    const revision = await this.write(claim.id, { holder: claim.holder, until, ...kept }, claim.revision, claim);
    return { id: claim.id, holder: claim.holder, until, revision, ...kept };
  }

  async release(claim: Claim): Promise<void> {
    try {
      await this.guard(() => this.kv.delete(claim.id, { previousSeq: claim.revision }), `release the claim on ${claim.id}`);
    } catch (err) {
      if (!isWrongLastSequence(err)) throw err;
    }
  }

  /** Puts `value` at `revision` (undefined: only if there is no claim now). */
  private async write(id: string, value: Stored, revision: number | undefined, held?: Claim): Promise<number> {
    const data = JSON.stringify(value);
    try {
      return await this.guard(() => (revision === undefined ? this.kv.create(id, data) : this.kv.update(id, data, revision)), `write the claim on ${id}`);
    } catch (err) {
      if (isWrongLastSequence(err)) throw new ClaimLostError(held ?? { id, ...value, revision: revision ?? 0 });
      throw err;
    }
  }

  private async guard<T>(f: () => Promise<T>, what: string): Promise<T> {
    try {
      return await f();
    } catch (err) {
      if (isWrongLastSequence(err)) throw err;
      throw new UnavailableError(`cannot ${what}: ${errorMessage(err)}`, { cause: err });
    }
  }
}

/** The KV client reports a compare-and-set conflict as the server's wrong-last-sequence error, or in its own words for create. */
function isWrongLastSequence(err: unknown): boolean {
  if (err instanceof JetStreamApiError) return err.code === WRONG_LAST_SEQUENCE;
  return err instanceof Error && /wrong last sequence|key exists/i.test(err.message);
}

/** The in-memory twin; `setAvailable(false)` makes every call fail as NATS down would. */
export class InMemoryClaimStore implements ClaimStore {
  private readonly claims = new Map<string, Claim>();
  private revision = 0;
  private available = true;

  constructor(private readonly now: () => number = Date.now) {}

  setAvailable(available: boolean): void {
    this.available = available;
  }

  async read(id: string): Promise<Claim | undefined> {
    this.check(`read the claim on ${id}`);
    const claim = this.claims.get(id);
    return claim && { ...claim };
  }

  async acquire(id: string, holder: string, ttlMs: number, options: AcquireOptions = {}): Promise<Acquired> {
    const current = await this.read(id);
    if (current && current.holder !== holder && isLive(current, this.now()) && !options.holderGone?.(current.holder)) {
      return { taken: false, claim: current };
    }
    const kept = current?.result !== undefined ? { result: current.result } : {};
    const claim: Claim = { id, holder, until: this.now() + ttlMs, revision: ++this.revision, ...kept };
    this.claims.set(id, claim);
    return { taken: true, claim: { ...claim } };
  }

  async renew(claim: Claim, ttlMs: number, result = claim.result): Promise<Claim> {
    this.check(`write the claim on ${claim.id}`);
    if (this.claims.get(claim.id)?.revision !== claim.revision) throw new ClaimLostError(claim);
    const renewed: Claim = { id: claim.id, holder: claim.holder, until: this.now() + ttlMs, revision: ++this.revision, ...(result !== undefined ? { result } : {}) };
    this.claims.set(claim.id, renewed);
    return { ...renewed };
  }

  async release(claim: Claim): Promise<void> {
    this.check(`release the claim on ${claim.id}`);
    if (this.claims.get(claim.id)?.revision === claim.revision) this.claims.delete(claim.id);
  }

  private check(what: string): void {
    if (!this.available) throw new UnavailableError(`cannot ${what}: the claims store is unavailable`);
  }
}
