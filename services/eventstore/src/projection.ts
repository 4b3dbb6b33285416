// In-memory projections of aggregates, fed by a follow subscription, and the command
// loop: decide on the projected state, append with its revision, on conflict re-read
// the aggregate from the store and decide again.
import { Backoff, ConcurrencyError, EphemeraError, UnavailableError, delay, errorMessage, type Logger } from "@ephemera/kit";
import { deserialize, serialize } from "node:v8";
import type { SnapshotStore } from "./snapshots.js";
import type { AppendMeta, AppendResult, Commit, EventStore, Expected, NewEvent, RecordedEvent, Subscription } from "./types.js";

/**
 * A projection's fold threw on a recorded event. The state past it is unknown, so nothing
 * after it is applied: skipping it would leave a state no history leads to. Not retryable:
 * the same fold of the same event throws again, until a version that folds it runs.
 */
export class ProjectionFaultError extends EphemeraError {
  readonly code = "projection-fault";
  readonly retryable = false;
  constructor(
    readonly aggregate: string,
    /** The aggregate id (the event's subject). */
    readonly subject: string,
    readonly position: number,
    readonly type: string,
    cause: unknown,
  ) {
    super(`the ${aggregate} projection cannot fold ${type} of ${subject} at position ${position}: ${errorMessage(cause)}`, { cause });
    this.name = "ProjectionFaultError";
  }
}

export const isProjectionFault = (e: unknown): e is ProjectionFaultError => e instanceof ProjectionFaultError;

export interface Entity<S> extends Expected {
  state: S;
}

export interface ProjectionOptions<S> {
  /**
   * Whether an entity is over (a deleted sandbox, a plugin with no version): it leaves
   * memory, and a later commit of the same id folds as on a new entity. Holds only for
   * states a later event folds as it would on `initial()`.
   */
  retired?: (state: S, id: string) => boolean;
}

/** What a projection holds, as a snapshot carries it. */
export interface ProjectionImage<S> {
  entities: Array<[string, Entity<S>]>;
  tombstones: Array<[string, Entity<S>]>;
}

export class Projection<S> {
  private readonly entities = new Map<string, Entity<S>>();
  /**
   * Retired entities, by id, until the feed has passed their revision: a command applies its
   * own commit at once, and the feed delivers the commits before it later; without the
   * tombstone such an older commit would make a new, partial entity of a retired one.
   */
  private readonly tombstones = new Map<string, Entity<S>>();
  /** The position up to which the feed has applied every commit. */
  private passedAt = 0;

  constructor(
    readonly aggregate: string,
    private readonly initial: () => S,
    private readonly evolve: (state: S, event: RecordedEvent) => S,
    private readonly options: ProjectionOptions<S> = {},
  ) {}

  /** Applies a commit once: a commit at or below the entity's revision is ignored. */
  apply(commit: Commit): boolean {
    return this.applyCommit(commit) !== undefined;
  }

  /** Applies a commit as `apply` does; the entity after it (retired or not), or undefined when it was ignored. */
  applyCommit(commit: Commit): Entity<S> | undefined {
    if (commit.aggregate !== this.aggregate) return undefined;
    const id = commit.aggregateId;
    const tombstone = this.tombstones.get(id);
    if (tombstone && commit.position <= tombstone.revision) return undefined;
    const held = this.entities.get(id) ?? tombstone;
    // The feed applied every commit up to `passedAt`: one of an id not held was retired since.
    if (!held && commit.position <= this.passedAt) return undefined;
    const current = held ?? this.empty();
    if (commit.position <= current.revision) return undefined;
    const entity = this.foldOnto(current, commit);
    this.put(id, entity);
    return entity;
  }

  /** The entity after `commit`, folded onto `entity`; nothing is stored. */
  foldOnto(entity: Entity<S>, commit: Commit): Entity<S> {
    let state = entity.state;
    for (const e of commit.events) state = this.fold(state, e, commit.aggregateId);
    return { state, revision: commit.position, version: commit.events.at(-1)?.sequence ?? entity.version };
  }

  /** Takes an entity out of memory (a workflow whose sandbox is gone), as a retired one. */
  retire(id: string): void {
    const entity = this.entities.get(id);
    if (!entity) return;
    this.entities.delete(id);
    this.tombstones.set(id, entity);
  }

  /** The feed applied every commit up to `position`: tombstones at or below it are no longer needed. */
  passed(position: number): void {
    this.passedAt = Math.max(this.passedAt, position);
    for (const [id, t] of this.tombstones) if (t.revision <= position) this.tombstones.delete(id);
  }

  get(id: string): Entity<S> | undefined {
    return this.entities.get(id);
  }

  getOrEmpty(id: string): Entity<S> {
    return this.entities.get(id) ?? this.empty();
  }

  /** The entity as last folded here, retired ones included while their tombstone stands. */
  latest(id: string): Entity<S> | undefined {
    return this.entities.get(id) ?? this.tombstones.get(id);
  }

  /** Whether entities may retire: an id not in memory may then be one that did. */
  get retires(): boolean {
    return this.options.retired !== undefined;
  }

  /** How many entities are in memory (retired ones are not). */
  get size(): number {
    return this.entities.size;
  }

  entries(): IterableIterator<[string, Entity<S>]> {
    return this.entities.entries();
  }

  image(): ProjectionImage<S> {
    return { entities: [...this.entities], tombstones: [...this.tombstones] };
  }

  /** Replaces what this projection holds with a snapshot's image. */
  restore(image: ProjectionImage<S>): void {
    this.entities.clear();
    this.tombstones.clear();
    for (const [id, e] of image.entities) this.entities.set(id, e);
    for (const [id, e] of image.tombstones) this.tombstones.set(id, e);
  }

  /** Replaces an entity with a fold of the aggregate as read from the store. */
  async reload(store: EventStore, id: string): Promise<Entity<S>> {
    return (await this.readFresh(store, id, true));
  }

  /**
   * The fold of one aggregate as the store holds it, read by its subject (the per-aggregate
   * read model): how a retired entity is read on demand. Kept in memory only if live.
   */
  async read(store: EventStore, id: string): Promise<Entity<S>> {
    return this.readFresh(store, id, false);
  }

  private async readFresh(store: EventStore, id: string, keep: boolean): Promise<Entity<S>> {
    const read = await store.read(this.aggregate, id);
    let state = this.initial();
    for (const e of read.events) state = this.fold(state, e, id);
    const entity = { state, revision: read.revision, version: read.version };
    const current = this.latest(id);
    if (current && current.revision > entity.revision) return current;
    if (keep && entity.revision > 0) this.put(id, entity);
    return entity;
  }

  private put(id: string, entity: Entity<S>): void {
    if (this.options.retired?.(entity.state, id)) {
      this.entities.delete(id);
      this.tombstones.set(id, entity);
    } else {
      this.entities.set(id, entity);
      this.tombstones.delete(id);
    }
  }

  private fold(state: S, event: RecordedEvent, id: string): S {
    try {
      return this.evolve(state, event);
    } catch (err) {
      throw new ProjectionFaultError(this.aggregate, id, event.position, event.type, err);
    }
  }

  private empty(): Entity<S> {
    return { state: this.initial(), revision: 0, version: 0 };
  }
}

/** Append metadata, plus the command's key: what makes the commit id deterministic. */
export interface CommandMeta extends AppendMeta {
  /** E.g. `record-success:<runId>`. The commit id is `<aggregate>.<id>@<version>:<command>`. */
  command?: string;
}

/**
 * The deterministic commit id of a command decided on an aggregate at a version: a retried
 * append of the same decision is dropped by the store, while a different command at the
 * same version still conflicts (and is decided again).
 */
export const commitIdOf = (aggregate: string, id: string, version: number, command: string) => `${aggregate}.${id}@${version}:${command}`;

export interface ExecuteResult<S> {
  entity: Entity<S>;
  appended?: AppendResult;
}

/**
 * Decides on the current state of one aggregate and appends the events. `decide` may
 * run more than once (after a conflict) and must be pure. Returns the state after.
 */
export async function execute<S>(
  store: EventStore,
  projection: Projection<S>,
  id: string,
  decide: (state: S, entity: Entity<S>) => NewEvent[],
  meta: CommandMeta,
  attempts = 8,
): Promise<ExecuteResult<S>> {
  // An id not in memory may be a retired entity: its decision needs its state, read from the store.
  let entity = projection.latest(id) ?? (projection.retires ? await projection.reload(store, id) : projection.getOrEmpty(id));
  const conflicts = new Backoff(CONFLICT_BACKOFF);
  const outages = new Backoff(UNAVAILABLE_BACKOFF);
  for (let attempt = 1; ; attempt++) {
    const events = decide(entity.state, entity);
    if (events.length === 0) return { entity };
    try {
      const { command, ...rest } = meta;
      const commitId = command === undefined ? rest.commitId : commitIdOf(projection.aggregate, id, entity.version, command);
      const appended = await store.append(projection.aggregate, id, entity, events, { ...rest, ...(commitId ? { commitId } : {}) });
      const commit = { aggregate: projection.aggregate, aggregateId: id, position: appended.revision, events: appended.events };
      // Already applied (the feed was first) and maybe retired since: the caller still gets the state its command made.
      return { entity: projection.applyCommit(commit) ?? projection.foldOnto(entity, commit), appended };
    } catch (err) {
      if (attempt >= attempts) throw err;
      if (err instanceof ConcurrencyError) {
        await delay(conflicts.next());
        entity = await projection.reload(store, id);
        continue;
      }
      // A store that failed for a moment (a server just restarted): the same commit again is
      // safe when its id is deterministic, since the store drops it if the first one landed.
      if (!(err instanceof UnavailableError) || meta.command === undefined || attempt >= UNAVAILABLE_ATTEMPTS) throw err;
      await delay(outages.next());
    }
  }
}

/** Appends retried while the store is unavailable (about 4 s in all). */
const UNAVAILABLE_ATTEMPTS = 4;
/** Writers racing on one entity: jittered, so the losers of a race do not collide again. */
const CONFLICT_BACKOFF = { firstMs: 10, maxMs: 200 };
const UNAVAILABLE_BACKOFF = { firstMs: 250, maxMs: 2000 };

/** What a feed feeds: a Projection of any state. */
export interface FedProjection {
  /** Names it in a snapshot (a state kept beside the projections may name itself). */
  readonly aggregate: string;
  apply(commit: Commit): boolean;
  passed(position: number): void;
  /** What a snapshot carries of it (structured-cloneable). */
  image(): unknown;
  restore(image: unknown): void;
}

/**
 * Where and how often a feed keeps a snapshot of its projections. The fingerprint names the
 * code that folds (see codeFingerprint): a snapshot is restored only by the same code, since
 * a changed fold would have made another state of the same commits.
 */
export interface FeedSnapshots {
  store: SnapshotStore;
  /** One snapshot per name: the service role, e.g. `sandbox`. */
  name: string;
  fingerprint: string;
  /** Written once this many commits were applied since the last one (default 1000)... */
  everyCommits?: number;
  /** ...or this often when any was (default 30 s); and at stop. */
  everyMs?: number;
  /** How long start() waits for the snapshot before replaying the stream instead (default 30 s). */
  readTimeoutMs?: number;
}

/** Bumped when the layout of a snapshot's body changes. */
export const SNAPSHOT_SCHEMA = 1;

interface SnapshotBody {
  schema: number;
  feed: string;
  fingerprint: string;
  position: number;
  aggregates: string[];
  images: unknown[];
}

/** The types of a commit's events, for a fault's message; its events may be what cannot be read (commitOf parses them when read). */
function typesOf(commit: Commit): string {
  try {
    return commit.events.map((e) => e.type).join(",");
  } catch {
    return "(events that cannot be read)";
  }
}

/** How long a feed behind a waiter may apply nothing before it is followed again. */
const STALL_MS = 1000;
const SNAPSHOT_READ_MS = 30_000;

/**
 * Feeds a set of projections from the store and tells when a position has been applied,
 * so a reaction never decides on a state older than the event it reacts to. A fold that
 * throws stops the feed at that commit, loudly: logged with the event, start() and every
 * waiter rejected with the ProjectionFaultError, and the feed unhealthy (a HealthSource,
 * so the service reports NOT_SERVING) until the process is replaced.
 *
 * With snapshots, start() restores the newest one this code wrote and follows from its
 * position instead of the beginning; one that is missing, unreadable or of other code is
 * passed over (an info line) for a replay of the whole stream.
 */
export class Feed {
  private applied = 0;
  /** Where the feed began following: 0, or the restored snapshot's position. */
  private began = 0;
  private subscription?: Subscription;
  private resyncing = false;
  private stopped = false;
  private fault?: ProjectionFaultError;
  private readonly faulted: Promise<never>;
  private markFaulted!: (e: ProjectionFaultError) => void;
  private readonly waiters = new Set<{ position: number; resolve: () => void; reject: (e: Error) => void }>();
  private readonly listeners: Array<(commit: Commit) => void> = [];
  private readonly restoreListeners: Array<() => void> = [];
  private readonly healthListeners = new Set<(healthy: boolean) => void>();
  /** Position of the last snapshot written or restored. */
  private snapshotAt = 0;
  private writing?: Promise<void>;
  private snapshotTimer?: NodeJS.Timeout;
  private snapshotFailing = false;

  constructor(
    private readonly store: EventStore,
    private readonly projections: FedProjection[],
    private readonly logger?: Logger,
    private readonly snapshots?: FeedSnapshots,
  ) {
    this.faulted = new Promise<never>((_, reject) => { this.markFaulted = reject; });
    this.faulted.catch(() => undefined);
  }

  /** The position start() followed from: above 0 when a snapshot was restored. */
  get startedFrom(): number {
    return this.began;
  }

  get position(): number {
    return this.applied;
  }

  /** False once a fold failed: the projections stopped at the commit before it. */
  get healthy(): boolean {
    return !this.fault;
  }

  onChange(listener: (healthy: boolean) => void): () => void {
    this.healthListeners.add(listener);
    return () => this.healthListeners.delete(listener);
  }

  /** Called once a snapshot was restored, before the feed follows from its position: for indexes kept beside the projections. */
  onRestore(listener: () => void): void {
    this.restoreListeners.push(listener);
  }

  /** Called after each commit is applied to the projections. */
  onCommit(listener: (commit: Commit) => void): void {
    this.listeners.push(listener);
  }

  /** Replays the store into the projections and keeps them current; resolves when caught up, rejects if a fold fails first. */
  async start(): Promise<void> {
    await this.restore();
    this.began = this.applied;
    const end = await this.store.position().catch(() => undefined);
    this.subscription = this.follow();
    // Caught up when the consumer says nothing is pending, or when the stream's end at start is
    // applied: a consumer that goes silent part way (seen after a restart under load) is
    // followed again by waitFor's stall check instead of holding the start for ever.
    const reached = end === undefined ? new Promise<never>(() => undefined) : this.reach(end);
    await Promise.race([this.subscription.caughtUp, reached, this.faulted]);
    if (this.snapshots) {
      this.snapshotTimer = setInterval(() => { if (this.applied > this.snapshotAt) void this.snapshot(); }, this.snapshots.everyMs ?? 30_000);
      this.snapshotTimer.unref();
    }
  }

  private async restore(): Promise<void> {
    const s = this.snapshots;
    if (!s) return;
    let passedOver: string;
    try {
      // Bounded: a read that never answers must not hold the start for ever; the stream is replayed instead.
      let timer: NodeJS.Timeout | undefined;
      const waitMs = s.readTimeoutMs ?? SNAPSHOT_READ_MS;
      const stored = await Promise.race([
        s.store.read(s.name),
        new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`no answer in ${waitMs} ms`)), waitMs); }),
      ]).finally(() => clearTimeout(timer));
      const body = stored && this.decode(stored.body);
      const end = stored && (await this.store.position());
      if (!stored || body === undefined) passedOver = "there is none";
      else if (typeof body === "string") passedOver = body;
      else if (stored.fingerprint !== s.fingerprint || body.fingerprint !== s.fingerprint) passedOver = "it was written by other code";
      else if (body.position !== stored.position) passedOver = "its position does not match its body";
      else if (end !== undefined && end < body.position) passedOver = `it covers position ${body.position}, past the stream's end (${end})`;
      else {
        body.images.forEach((image, i) => this.projections[i]!.restore(image));
        this.applied = this.snapshotAt = body.position;
        for (const p of this.projections) p.passed(body.position);
        for (const l of this.restoreListeners) l();
        const entities = body.images.reduce((n: number, image) => n + ((image as Partial<ProjectionImage<unknown>>).entities?.length ?? 0), 0);
        this.logger?.info({ feed: s.name, position: body.position, entities }, "restored the projections' snapshot; following the stream from its position");
        return;
      }
    } catch (err) {
      passedOver = `it cannot be read (${errorMessage(err)})`;
    }
    this.logger?.info({ feed: s.name }, `no snapshot of the projections restored (${passedOver}); replaying the whole stream`);
  }

  /** The body of a snapshot of these projections, or why it is not one. */
  private decode(bytes: Uint8Array): SnapshotBody | string {
    let body: SnapshotBody;
    try {
      body = deserialize(bytes) as SnapshotBody;
    } catch (err) {
      return `it is corrupt (${errorMessage(err)})`;
    }
    const aggregates = this.projections.map((p) => p.aggregate);
    if (typeof body !== "object" || body === null || body.schema !== SNAPSHOT_SCHEMA) return "it has another schema";
    if (body.feed !== this.snapshots?.name || JSON.stringify(body.aggregates) !== JSON.stringify(aggregates)) return "it holds other projections";
    if (!Array.isArray(body.images) || body.images.length !== aggregates.length) return "it is corrupt (no image per projection)";
    return body;
  }

  /** Writes a snapshot of the projections at the applied position (one write at a time). */
  snapshot(): Promise<void> {
    const s = this.snapshots;
    if (!s || this.fault) return Promise.resolve();
    if (this.writing) return this.writing;
    const position = this.applied;
    let bytes: Uint8Array;
    try {
      // Taken in one synchronous step: every projection at the same position.
      const body: SnapshotBody = {
        schema: SNAPSHOT_SCHEMA, feed: s.name, fingerprint: s.fingerprint, position,
        aggregates: this.projections.map((p) => p.aggregate), images: this.projections.map((p) => p.image()),
      };
      bytes = serialize(body);
    } catch (err) {
      this.snapshotFailed(err);
      return Promise.resolve();
    }
    this.writing = s.store.write(s.name, { position, fingerprint: s.fingerprint, body: bytes }).then(
      () => {
        this.snapshotAt = Math.max(this.snapshotAt, position);
        if (this.snapshotFailing) this.logger?.info({ feed: s.name, position }, "the projections' snapshot is written again");
        this.snapshotFailing = false;
      },
      (err: unknown) => this.snapshotFailed(err),
    ).finally(() => { this.writing = undefined; });
    return this.writing;
  }

  /** A snapshot not written costs only a longer replay at the next start: logged once per streak. */
  private snapshotFailed(err: unknown): void {
    if (!this.snapshotFailing) this.logger?.warn({ err, feed: this.snapshots?.name }, "cannot write the projections' snapshot; will try again");
    this.snapshotFailing = true;
  }

  private follow(): Subscription {
    return this.store.follow({ from: this.applied }, (commit) => {
      if (this.fault || commit.position <= this.applied) return;
      try {
        for (const p of this.projections) p.apply(commit);
      } catch (err) {
        this.fail(commit, err);
        return;
      }
      this.applied = commit.position;
      for (const l of this.listeners) l(commit);
      // After the listeners: they may still read an entity this commit retired (Projection.latest).
      for (const p of this.projections) p.passed(commit.position);
      const every = this.snapshots?.everyCommits ?? 1000;
      if (this.snapshots && this.applied - this.snapshotAt >= every) void this.snapshot();
      for (const w of this.waiters) if (w.position <= this.applied) { this.waiters.delete(w); w.resolve(); }
    });
  }

  private fail(commit: Commit, err: unknown): void {
    const fault = err instanceof ProjectionFaultError
      ? err
      : new ProjectionFaultError(commit.aggregate, commit.aggregateId, commit.position, typesOf(commit), err);
    this.fault = fault;
    this.logger?.error(
      {
        err: fault.cause, aggregate: fault.aggregate, subject: fault.subject, position: fault.position, type: fault.type,
        applied: this.applied,
      },
      "a projection cannot fold an event; it stops here and the service is not serving",
    );
    this.markFaulted(fault);
    for (const w of this.waiters) w.reject(fault);
    this.waiters.clear();
    for (const l of this.healthListeners) l(false);
  }

  /**
   * Follows again from the last applied commit. A follow that went silent (its consumer
   * lost after a server restart without an error) is noticed by a waiter that times out.
   */
  private resync(): void {
    if (this.resyncing || this.stopped || this.fault) return;
    this.resyncing = true;
    const old = this.subscription;
    this.subscription = this.follow();
    // The old one may never stop cleanly if its consumer is gone: do not wait for it.
    void Promise.race([old?.stop(), new Promise((r) => setTimeout(r, 5000).unref())]).catch(() => undefined)
      .finally(() => { this.resyncing = false; });
  }

  /** Resolves once `position` is applied, following again as often as the feed stalls; never rejects but with a fault. */
  private async reach(position: number): Promise<void> {
    for (;;) {
      try {
        return await this.waitFor(position);
      } catch (err) {
        if (this.fault || this.stopped) throw err;
      }
    }
  }

  /**
   * Resolves once every commit up to `position` has been applied. A follow that applies
   * nothing for STALL_MS while a waiter is behind is followed again at once (a consumer can
   * go silent on a NATS cluster without an error), so a read waits for the stream, not for
   * its deadline; past the deadline it is UnavailableError.
   */
  waitFor(position: number, timeoutMs = 10_000): Promise<void> {
    if (position <= this.applied) return Promise.resolve();
    if (this.fault) return Promise.reject(this.fault);
    return new Promise((resolve, reject) => {
      let seen = this.applied;
      const stall = setInterval(() => {
        if (this.applied === seen) this.resync();
        seen = this.applied;
      }, Math.min(STALL_MS, timeoutMs / 3));
      const done = () => { clearTimeout(t); clearInterval(stall); };
      const w = {
        position,
        resolve: () => { done(); resolve(); },
        reject: (e: Error) => { done(); reject(e); },
      };
      const t = setTimeout(() => {
        this.waiters.delete(w);
        done();
        this.resync();
        reject(new UnavailableError(`projection did not reach position ${position} in ${timeoutMs} ms (at ${this.applied}); following again`));
      }, timeoutMs);
      this.waiters.add(w);
    });
  }

  /** Stops following; with snapshots, writes one of where the projections stand. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.snapshotTimer);
    for (const w of this.waiters) w.reject(new Error("projection feed stopped"));
    this.waiters.clear();
    await this.subscription?.stop();
    await this.writing;
    if (this.snapshots && this.subscription && this.applied > this.snapshotAt) await this.snapshot();
  }
}
