// Where feeds keep their snapshots: one object per feed name, holding the projections'
// live entities and the stream position they cover. On NATS a JetStream Object Store
// bucket (`<prefix>_snapshots`: chunked, so a snapshot may exceed max_payload); in tests
// an in-memory twin that passes the same contract.
import type { NatsConnection } from "@nats-io/nats-core";
import { jetstream } from "@nats-io/jetstream";
import { Objm, type ObjectStore } from "./objects.js";
import { UnavailableError, errorMessage } from "@ephemera/kit";

/** A stored snapshot: its body is opaque here (the feed encodes and checks it). */
export interface StoredSnapshot {
  /** The stream position the body covers: every commit up to it is folded in. */
  position: number;
  /** The code that wrote it (see Feed): a snapshot of other code is never restored. */
  fingerprint: string;
  body: Uint8Array;
}

export interface SnapshotStore {
  /** The snapshot under `name`, or undefined when there is none. */
  read(name: string): Promise<StoredSnapshot | undefined>;
  /**
   * Stores a snapshot under `name` unless one of the same fingerprint at a higher position
   * is there; resolves to whether it was written. Two replicas writing at once may still
   * leave the lower one: harmless, since either is a true state at its position, and the
   * feed that restores it follows the stream from there.
   */
  write(name: string, snapshot: StoredSnapshot): Promise<boolean>;
}

export const snapshotsBucket = (prefix: string) => `${prefix}_snapshots`;

const stays = (held: { position: number; fingerprint: string } | undefined, next: StoredSnapshot) =>
  !!held && held.fingerprint === next.fingerprint && held.position > next.position;

export class JetStreamSnapshotStore implements SnapshotStore {
  private constructor(private readonly os: ObjectStore, private readonly bucket: string) {}

  /** Opens (creating it if needed) the bucket of `prefix`; `replicas` as for the streams (EPHEMERA_STREAM_REPLICAS). */
  static async open(nc: NatsConnection, prefix: string, { timeoutMs = 5_000, replicas = 1 }: { timeoutMs?: number; replicas?: number } = {}): Promise<JetStreamSnapshotStore> {
    const bucket = snapshotsBucket(prefix);
    try {
      const objm = new Objm(jetstream(nc, { timeout: timeoutMs }));
      return new JetStreamSnapshotStore(await objm.create(bucket, { description: "ephemera: projection snapshots", replicas }), bucket);
    } catch (err) {
      throw new UnavailableError(`cannot open the snapshot store ${bucket}: ${errorMessage(err)}`, { cause: err });
    }
  }

  async read(name: string): Promise<StoredSnapshot | undefined> {
    const info = await this.guard(() => this.os.info(name), `look up ${name}`);
    if (!info || info.deleted) return undefined;
    const held = heldOf(info.metadata);
    const body = await this.guard(() => this.os.getBlob(name), `read ${name}`);
    if (!held || body === null) return undefined;
    return { ...held, body };
  }

  async write(name: string, snapshot: StoredSnapshot): Promise<boolean> {
    const info = await this.guard(() => this.os.info(name), `look up ${name}`);
    if (info && !info.deleted && stays(heldOf(info.metadata), snapshot)) return false;
    const metadata = { position: String(snapshot.position), fingerprint: snapshot.fingerprint };
    await this.guard(() => this.os.putBlob({ name, metadata }, snapshot.body), `write ${name}`);
    return true;
  }

  private async guard<T>(fn: () => Promise<T>, what: string): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw new UnavailableError(`snapshot store ${this.bucket}: cannot ${what}: ${errorMessage(err)}`, { cause: err });
    }
  }
}

function heldOf(metadata: Record<string, string> | undefined): { position: number; fingerprint: string } | undefined {
  const position = Number(metadata?.["position"]);
  const fingerprint = metadata?.["fingerprint"];
  return Number.isSafeInteger(position) && position >= 0 && fingerprint ? { position, fingerprint } : undefined;
}

/** The in-memory twin; `setAvailable(false)` makes every call fail as NATS down would. */
export class InMemorySnapshotStore implements SnapshotStore {
  private readonly snapshots = new Map<string, StoredSnapshot>();
  private available = true;
  /** Snapshots written, for tests that wait for one. */
  writes = 0;

  setAvailable(available: boolean): void {
    this.available = available;
  }

  async read(name: string): Promise<StoredSnapshot | undefined> {
    this.check(`read ${name}`);
    const held = this.snapshots.get(name);
    return held && { ...held, body: Uint8Array.from(held.body) };
  }

  async write(name: string, snapshot: StoredSnapshot): Promise<boolean> {
    this.check(`write ${name}`);
    if (stays(this.snapshots.get(name), snapshot)) return false;
    this.snapshots.set(name, { ...snapshot, body: Uint8Array.from(snapshot.body) });
    this.writes++;
    return true;
  }

  private check(what: string): void {
    if (!this.available) throw new UnavailableError(`snapshot store: cannot ${what}: unavailable`);
  }
}
