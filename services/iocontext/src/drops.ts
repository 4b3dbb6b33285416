// Dropping a deleted sandbox's output values: by their keys, once, and recorded.
//
// The output journal is a JetStream object store, whose object names cannot be searched
// by prefix (the server keys each by the base64 of its name): listing it costs the whole
// store. Its keys are `<runId>/<output>` and run ids are deterministic
// (`<workflowId>.<step>.<attempt>`, attempts 1..n), so the keys of a sandbox follow from
// what this service folds anyway: the runs its workflows dispatched, and the outputs the
// plugin version declares for each step (the only ones a run may write, even while the
// cache is down). One lookup per key: O(its outputs). The cache keeps its own index of a
// sandbox's runs (RedisOutputStore). Once both are done, `outputs.dropped` is recorded on
// `outputs.<routingKey>`: a start replays it and drops only sandboxes deleted and not yet
// dropped. Two IO contexts may drop the same sandbox at once: removing what is gone
// changes nothing, and the record is appended once (deterministic commit id, expected new).
// A run still ending when a forced delete dropped its sandbox may journal its values after
// the drop: its result, seen live, is dropped too (not if every IO context was down then).
import { Aggregates, decode, encode, ev, parseRunId, runId, valueKey, type Phase } from "@ephemera/events";
import { NO_AGGREGATE, commitIdOf, type Commit, type EventStore, type FedProjection, type ValueStore } from "@ephemera/eventstore";
import { Backoff, ConcurrencyError, UnavailableError, delay, type Logger } from "@ephemera/kit";
import { findStep } from "./inputs.js";
import type { OutputStore } from "./outputs.js";
import type { Projections } from "./state.js";

export interface DueDrop {
  routingKey: string;
  sandbox: string;
  /** The journal keys its runs may have written; undefined when a plugin version's spec is unknown here. */
  keys: string[] | undefined;
  /** Values of a run that ended after its sandbox was dropped: dropped live only, never due at a start. */
  late?: boolean;
}

/**
 * What is due, folded from the stream in order (called after each commit is applied to the
 * projections): the workflows of each live sandbox, and the sandboxes deleted and not yet
 * dropped. Both hold live state only: a sandbox leaves the first when it is deleted, and
 * the second when its drop is recorded.
 */
export class DropLedger implements FedProjection {
  /** Names the ledger in a snapshot of the feed it is kept beside. */
  readonly aggregate = "drop-ledger";
  private workflowsOf = new Map<string, Set<string>>();
  private due = new Map<string, DueDrop>();

  // Fed by observe() once the projections have folded a commit; carried in the feed's snapshots.
  apply(): boolean {
    return false;
  }

  passed(): void {}

  image(): { workflowsOf: Map<string, Set<string>>; due: Map<string, DueDrop> } {
    return { workflowsOf: this.workflowsOf, due: this.due };
  }

  restore(image: unknown): void {
    const { workflowsOf, due } = image as ReturnType<DropLedger["image"]>;
    this.workflowsOf = new Map(workflowsOf);
    this.due = new Map(due);
  }

  /** Folds a commit; returns the drop it makes due (a sandbox deleted), if any. */
  observe(commit: Commit, projections: Projections): DueDrop | undefined {
    const types = commit.events.map((e) => e.type);
    if (commit.aggregate === Aggregates.workflow && types.includes("ephemera.workflow.started.v1")) {
      // latest: a workflow of a routing key no live sandbox has is retired at once, yet its runs are still its sandbox's.
      const routingKey = projections.workflows.latest(commit.aggregateId)?.state.started?.routingKey;
      if (routingKey) this.workflowsOf.set(routingKey, (this.workflowsOf.get(routingKey) ?? new Set()).add(commit.aggregateId));
    } else if (commit.aggregate === Aggregates.sandbox && types.includes("ephemera.sandbox.deleted.v1")) {
      // Deleted, so just retired: its tombstone stands until the feed has passed this commit.
      const routingKey = projections.sandboxes.latest(commit.aggregateId)?.state.routingKey;
      if (!routingKey) return undefined;
      // Now, in stream order: the plugin version is deleted only after its last sandbox, so its spec is still known.
      const drop = { routingKey, sandbox: commit.aggregateId, keys: journalKeys(this.workflowsOf.get(routingKey) ?? [], projections) };
      this.workflowsOf.delete(routingKey);
      this.due.set(routingKey, drop);
      return drop;
    } else if (commit.aggregate === Aggregates.outputs && types.includes("ephemera.outputs.dropped.v1")) {
      this.due.delete(commit.aggregateId);
    } else if (commit.aggregate === Aggregates.steprun) {
      return this.lateResult(commit);
    }
    return undefined;
  }

  /** A result of a run whose sandbox is deleted and dropped (no longer live here, not due): a drop of its values. */
  private lateResult(commit: Commit): DueDrop | undefined {
    const run = parseRunId(commit.aggregateId);
    if (!run || this.workflowsOf.has(run.routingKey) || this.due.has(run.routingKey)) return undefined;
    const names = commit.events.flatMap((recorded) => {
      const e = decode(recorded);
      return e?.type === "ephemera.steprun.succeeded.v1" ? e.data.outputs.map((o) => o.name) : [];
    });
    if (!names.length) return undefined;
    return { routingKey: run.routingKey, sandbox: "", keys: names.map((name) => valueKey(commit.aggregateId, name)), late: true };
  }

  /** Sandboxes deleted whose drop is not recorded. */
  pending(): DueDrop[] {
    return [...this.due.values()];
  }
}

/** Every key the runs of these workflows may have written; undefined if a workflow's plugin spec is unknown. */
export function journalKeys(workflowIds: Iterable<string>, projections: Projections): string[] | undefined {
  const keys: string[] = [];
  for (const id of workflowIds) {
    const workflow = projections.workflows.get(id)?.state;
    const started = workflow?.started;
    if (!started) continue;
    const spec = projections.plugins.get(started.plugin)?.state.versions.get(started.version)?.spec;
    if (!spec) return undefined;
    for (const step of workflow.steps) {
      const attempts = step.current ? parseRunId(step.current)?.attempt ?? 0 : 0;
      const outputs = findStep(spec, started.phase as Phase, step.name)?.outputs ?? [];
      for (let attempt = 1; attempt <= attempts; attempt++) {
        for (const o of outputs) keys.push(valueKey(runId(id, step.name, attempt), o.name));
      }
    }
  }
  return keys;
}

export interface DropperDeps {
  store: EventStore;
  values: Pick<ValueStore, "remove" | "drop">;
  outputs: OutputStore;
  logger: Logger;
}

/** Attempts at one drop while a store is down (about a minute in all); one not done is due again at the next start. */
const DROP_ATTEMPTS = 8;

/** Carries out due drops one at a time, so a start with many due does not flood the stores. */
export class Dropper {
  private queue: Promise<void> = Promise.resolve();
  private readonly queued = new Set<string>();
  private readonly stopping = new AbortController();

  constructor(private readonly deps: DropperDeps) {}

  enqueue(drop: DueDrop): void {
    // A sandbox's drop once in the queue; a late one per run.
    const id = drop.late ? `${drop.keys?.[0]}` : drop.routingKey;
    if (this.queued.has(id)) return;
    this.queued.add(id);
    this.queue = this.queue
      .then(() => (this.stopping.signal.aborted ? undefined : this.attempt(drop)))
      .finally(() => this.queued.delete(id));
  }

  /** Cuts a backoff short and waits for the drop in hand; those queued behind it stay due. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.queue;
  }

  private async attempt(drop: DueDrop): Promise<void> {
    const { logger } = this.deps;
    const at = { sandbox: drop.sandbox, routingKey: drop.routingKey };
    const backoff = new Backoff({ firstMs: 500, maxMs: 30_000 });
    for (let attempt = 1; ; attempt++) {
      try {
        const done = await this.dropOnce(drop);
        logger.info({ ...at, ...done }, "outputs of a deleted sandbox dropped");
        return;
      } catch (err) {
        if (!(err instanceof UnavailableError) || attempt >= DROP_ATTEMPTS || this.stopping.signal.aborted) {
          logger.warn({ ...at, err }, "cannot drop the outputs of a deleted sandbox; due again at the next start");
          return;
        }
        const delayMs = backoff.next();
        logger.warn({ ...at, err, delayMs }, "cannot drop the outputs of a deleted sandbox yet; retrying");
        await delay(delayMs, this.stopping.signal);
        if (this.stopping.signal.aborted) return;
      }
    }
  }

  /** Idempotent as a whole: tried again from the start after a failure. */
  private async dropOnce(drop: DueDrop): Promise<{ values: number; runs: number }> {
    const { store, values: journal, outputs, logger } = this.deps;
    let values: number;
    if (drop.keys) {
      values = drop.keys.length ? await journal.remove(drop.keys) : 0;
    } else {
      logger.warn({ sandbox: drop.sandbox, routingKey: drop.routingKey }, "plugin spec of a deleted sandbox unknown: listing the output journal to drop its values");
      values = await journal.drop(`${drop.routingKey}.`);
    }
    const runs = await outputs.dropSandbox(drop.routingKey);
    if (drop.late) return { values, runs };
    try {
      await store.append(Aggregates.outputs, drop.routingKey, NO_AGGREGATE,
        [encode(ev("ephemera.outputs.dropped.v1", { sandbox: drop.sandbox, values, runs }))],
        { source: "iocontext", commitId: commitIdOf(Aggregates.outputs, drop.routingKey, 0, "drop") });
    } catch (err) {
      // Another IO context recorded it first: the same drop, done.
      if (!(err instanceof ConcurrencyError)) throw err;
    }
    return { values, runs };
  }
}
