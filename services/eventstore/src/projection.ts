// In-memory projections of aggregates, fed by a follow subscription, and the command
// loop: decide on the projected state, append with its revision, on conflict re-read
// the aggregate from the store and decide again.
import { ConcurrencyError, EphemeraError, UnavailableError, delay, errorMessage, type Logger } from "@ephemera/kit";
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

export class Projection<S> {
  private readonly entities = new Map<string, Entity<S>>();

  constructor(
    readonly aggregate: string,
    private readonly initial: () => S,
    private readonly evolve: (state: S, event: RecordedEvent) => S,
  ) {}

  /** Applies a commit once: a commit at or below the entity's revision is ignored. */
  apply(commit: Commit): boolean {
    if (commit.aggregate !== this.aggregate) return false;
    const current = this.entities.get(commit.aggregateId) ?? this.empty();
    if (commit.position <= current.revision) return false;
    let state = current.state;
    for (const e of commit.events) state = this.fold(state, e, commit.aggregateId);
    this.entities.set(commit.aggregateId, {
      state,
      revision: commit.position,
      version: commit.events.at(-1)?.sequence ?? current.version,
    });
    return true;
  }

  get(id: string): Entity<S> | undefined {
    return this.entities.get(id);
  }

  getOrEmpty(id: string): Entity<S> {
    return this.entities.get(id) ?? this.empty();
  }

  entries(): IterableIterator<[string, Entity<S>]> {
    return this.entities.entries();
  }

  /** Replaces an entity with a fold of the aggregate as read from the store. */
  async reload(store: EventStore, id: string): Promise<Entity<S>> {
    const read = await store.read(this.aggregate, id);
    let state = this.initial();
    for (const e of read.events) state = this.fold(state, e, id);
    const entity = { state, revision: read.revision, version: read.version };
    const current = this.entities.get(id);
    if (!current || current.revision <= entity.revision) this.entities.set(id, entity);
    return this.entities.get(id) ?? entity;
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
  let entity = projection.getOrEmpty(id);
  for (let attempt = 1; ; attempt++) {
    const events = decide(entity.state, entity);
    if (events.length === 0) return { entity };
    try {
      const { command, ...rest } = meta;
      const commitId = command === undefined ? rest.commitId : commitIdOf(projection.aggregate, id, entity.version, command);
      const appended = await store.append(projection.aggregate, id, entity, events, { ...rest, ...(commitId ? { commitId } : {}) });
      projection.apply({ aggregate: projection.aggregate, aggregateId: id, position: appended.revision, events: appended.events });
      return { entity: projection.getOrEmpty(id), appended };
    } catch (err) {
      if (attempt >= attempts) throw err;
      if (err instanceof ConcurrencyError) {
        await delay(Math.min(200, 5 * 2 ** attempt));
        entity = await projection.reload(store, id);
        continue;
      }
      // A store that failed for a moment (a server just restarted): the same commit again is
      // safe when its id is deterministic, since the store drops it if the first one landed.
      if (!(err instanceof UnavailableError) || meta.command === undefined || attempt >= UNAVAILABLE_ATTEMPTS) throw err;
      await delay(Math.min(2000, 250 * 2 ** (attempt - 1)));
    }
  }
}

/** Appends retried while the store is unavailable (about 4 s in all). */
const UNAVAILABLE_ATTEMPTS = 4;

/**
 * Feeds a set of projections from the store and tells when a position has been applied,
 * so a reaction never decides on a state older than the event it reacts to. A fold that
 * throws stops the feed at that commit, loudly: logged with the event, start() and every
 * waiter rejected with the ProjectionFaultError, and the feed unhealthy (a HealthSource,
 * so the service reports NOT_SERVING) until the process is replaced.
 */
export class Feed {
  private applied = 0;
  private subscription?: Subscription;
  private resyncing = false;
  private stopped = false;
  private fault?: ProjectionFaultError;
  private readonly faulted: Promise<never>;
  private markFaulted!: (e: ProjectionFaultError) => void;
  private readonly waiters = new Set<{ position: number; resolve: () => void; reject: (e: Error) => void }>();
  private readonly listeners: Array<(commit: Commit) => void> = [];
  private readonly healthListeners = new Set<(healthy: boolean) => void>();

  constructor(
    private readonly store: EventStore,
    private readonly projections: Array<{ apply(commit: Commit): boolean }>,
    private readonly logger?: Logger,
  ) {
    this.faulted = new Promise<never>((_, reject) => { this.markFaulted = reject; });
    this.faulted.catch(() => undefined);
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

  /** Called after each commit is applied to the projections. */
  onCommit(listener: (commit: Commit) => void): void {
    this.listeners.push(listener);
  }

  /** Replays the store into the projections and keeps them current; resolves when caught up, rejects if a fold fails first. */
  async start(): Promise<void> {
    this.subscription = this.follow();
    await Promise.race([this.subscription.caughtUp, this.faulted]);
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
      for (const w of this.waiters) if (w.position <= this.applied) { this.waiters.delete(w); w.resolve(); }
    });
  }

  private fail(commit: Commit, err: unknown): void {
    const fault = err instanceof ProjectionFaultError
      ? err
      : new ProjectionFaultError(
        commit.aggregate, commit.aggregateId, commit.position, commit.events.map((e) => e.type).join(","), err,
      );
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

  /** Resolves once every commit up to `position` has been applied. */
  waitFor(position: number, timeoutMs = 10_000): Promise<void> {
    if (position <= this.applied) return Promise.resolve();
    if (this.fault) return Promise.reject(this.fault);
    return new Promise((resolve, reject) => {
      const w = {
        position,
        resolve: () => { clearTimeout(t); resolve(); },
        reject: (e: Error) => { clearTimeout(t); reject(e); },
      };
      const t = setTimeout(() => {
        this.waiters.delete(w);
        this.resync();
        reject(new UnavailableError(`projection did not reach position ${position} in ${timeoutMs} ms (at ${this.applied}); following again`));
      }, timeoutMs);
      this.waiters.add(w);
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const w of this.waiters) w.reject(new Error("projection feed stopped"));
    this.waiters.clear();
    await this.subscription?.stop();
  }
}
