// The output journal: step output values kept outside the events, one object per run and
// output (`<runId>/<output>`), each checked against the SHA-256 its result event names.
// On NATS a JetStream Object Store bucket (`<prefix>_outputs`, values chunked, so 1 MiB
// and more per value); in tests an in-memory twin that passes the same contract.
import { createHash } from "node:crypto";
import type { NatsConnection } from "@nats-io/nats-core";
import { jetstream } from "@nats-io/jetstream";
import { Objm, type ObjectStore } from "./objects.js";
import { ConflictError, NotFoundError, UnavailableError, errorMessage } from "@ephemera/kit";

/** Structurally the events package's ValueJournal, plus dropping a sandbox's values. */
export interface ValueStore {
  /** Stores `value` under `key` (the same value again changes nothing); resolves to its SHA-256 (hex). */
  put(key: string, value: Uint8Array): Promise<string>;
  /** The value under `key`: NotFoundError when missing, ConflictError when it does not match `sha256`. */
  get(key: string, sha256: string): Promise<Buffer>;
  /**
   * The value under `key` as it was put, unchecked, or undefined: for a run whose result
   * has not named its digests yet (its outputs journaled while the cache was down).
   */
  read(key: string): Promise<Buffer | undefined>;
  /**
   * The SHA-256 (hex) of the value under `key`, or undefined: what `read` would give, for a
   * check that the value is the same, at one lookup (the value is not fetched).
   */
  digest(key: string): Promise<string | undefined>;
  /** Removes the values under these keys (a missing one is no error); resolves to how many went. One lookup per key. */
  remove(keys: string[]): Promise<number>;
  /**
   * Removes every value whose key starts with `prefix`; resolves to how many went. Lists
   * the whole journal (object names are not searchable by prefix): for when the keys
   * cannot be named, never on a path that runs per sandbox.
   */
  drop(prefix: string): Promise<number>;
}

/** How the object store names the kind of its objects' digests. */
const DIGEST_TYPE = "SHA-256=";

const sha256Hex = (value: Uint8Array) => createHash("sha256").update(value).digest("hex");
export const valuesBucket = (prefix: string) => `${prefix}_outputs`;

function checked(key: string, value: Buffer, sha256: string): Buffer {
  const actual = sha256Hex(value);
  if (actual !== sha256) throw new ConflictError(`the journaled value of ${key} does not match its digest (sha256 ${actual.slice(0, 12)}…, expected ${sha256.slice(0, 12)}…)`);
  return value;
}

export class JetStreamValueStore implements ValueStore {
  private constructor(private readonly os: ObjectStore) {}

  /** Opens (creating it if needed) the bucket of `prefix`; each call fails within `timeoutMs` while NATS does not answer. */
  /**
   * `replicas`: of the bucket's stream when this creates it (EPHEMERA_STREAM_REPLICAS). An
   * existing bucket is left as it is: it declares nothing else, and a replica count is an
   * operator's step, as for the streams (durables.ts).
   */
  static async open(nc: NatsConnection, prefix: string, { timeoutMs = 5_000, replicas = 1 }: { timeoutMs?: number; replicas?: number } = {}): Promise<JetStreamValueStore> {
    try {
      const objm = new Objm(jetstream(nc, { timeout: timeoutMs }));
      return new JetStreamValueStore(await objm.create(valuesBucket(prefix), { description: "ephemera: step output values", replicas }));
    } catch (err) {
      throw new UnavailableError(`cannot open the output journal ${valuesBucket(prefix)}: ${errorMessage(err)}`, { cause: err });
    }
  }

  async put(key: string, value: Uint8Array): Promise<string> {
    // Idempotent as it stands: a retried put (an answer lost) writes the same value again
    // under the same name; no lookup first, which would cost every put a round trip.
    await this.guard(() => this.os.putBlob({ name: key }, value), `store ${key}`);
    return sha256Hex(value);
  }

  async get(key: string, sha256: string): Promise<Buffer> {
    const blob = await this.guard(() => this.os.getBlob(key), `read ${key}`);
    if (blob === null) throw new NotFoundError(`the journaled value of ${key} is missing`);
    return checked(key, Buffer.from(blob), sha256);
  }

  async read(key: string): Promise<Buffer | undefined> {
    const blob = await this.guard(() => this.os.getBlob(key), `read ${key}`);
    return blob === null ? undefined : Buffer.from(blob);
  }

  async digest(key: string): Promise<string | undefined> {
    // The object's info (one direct get) carries the digest of its content: "SHA-256=<base64url>".
    const info = await this.guard(() => this.os.info(key), `look up ${key}`);
    if (!info || info.deleted) return undefined;
    if (!info.digest.startsWith(DIGEST_TYPE)) throw new ConflictError(`the journaled value of ${key} has a digest of another kind (${info.digest.split("=")[0]})`);
    return Buffer.from(info.digest.slice(DIGEST_TYPE.length), "base64url").toString("hex");
  }

  async remove(keys: string[]): Promise<number> {
    let removed = 0;
    for (const key of keys) {
      const info = await this.guard(() => this.os.info(key), `look up ${key}`);
      if (!info || info.deleted) continue;
      await this.guard(() => this.os.delete(key), `drop ${key}`);
      removed++;
    }
    return removed;
  }

  async drop(prefix: string): Promise<number> {
    const entries = await this.guard(() => this.os.list(), "list the output journal");
    const doomed = entries.filter((e) => !e.deleted && e.name.startsWith(prefix));
    for (const e of doomed) await this.guard(() => this.os.delete(e.name), `drop ${e.name}`);
    return doomed.length;
  }

  private async guard<T>(fn: () => Promise<T>, what: string): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      // Messages name keys (run ids and output names), never values.
      throw new UnavailableError(`output journal: cannot ${what}: ${errorMessage(err)}`, { cause: err });
    }
  }
}


/** The in-memory twin; `setAvailable(false)` makes every call fail as NATS down would. */
export class InMemoryValueStore implements ValueStore {
  private readonly values = new Map<string, Buffer>();
  private available = true;
  /** Calls refused while unavailable: lets a test wait until a caller has met the outage. */
  failures = 0;

  setAvailable(available: boolean): void {
    this.available = available;
  }

  /** For tests of what a damaged journal does: replaces a value without its digest. */
  tamper(key: string, value: Uint8Array): void {
    this.values.set(key, Buffer.from(value));
  }

  async put(key: string, value: Uint8Array): Promise<string> {
    this.check(`store ${key}`);
    this.values.set(key, Buffer.from(value));
    return sha256Hex(value);
  }

  async get(key: string, sha256: string): Promise<Buffer> {
    this.check(`read ${key}`);
    const value = this.values.get(key);
    if (!value) throw new NotFoundError(`the journaled value of ${key} is missing`);
    return checked(key, Buffer.from(value), sha256);
  }

  async read(key: string): Promise<Buffer | undefined> {
    this.check(`read ${key}`);
    const value = this.values.get(key);
    return value && Buffer.from(value);
  }

  async digest(key: string): Promise<string | undefined> {
    this.check(`look up ${key}`);
    const value = this.values.get(key);
    return value && sha256Hex(value);
  }

  async remove(keys: string[]): Promise<number> {
    this.check("drop values");
    return keys.filter((k) => this.values.delete(k)).length;
  }

  async drop(prefix: string): Promise<number> {
    this.check("list the output journal");
    const doomed = [...this.values.keys()].filter((k) => k.startsWith(prefix));
    for (const k of doomed) this.values.delete(k);
    return doomed.length;
  }

  private check(what: string): void {
    if (!this.available) {
      this.failures++;
      throw new UnavailableError(`output journal: cannot ${what}: unavailable`);
    }
  }
}
