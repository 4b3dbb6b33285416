// The fork reconciler's two folds: what each sandbox wants of its cluster (its sandbox
// events, as this consumer needs them) and what the runner recorded of its forks (the
// forks aggregate, which the runner owns), with the decision that records a report once.
import type * as pb from "@ephemera/proto";
import { ev, type DomainEvent } from "@ephemera/events";
import { baselineOf } from "@ephemera/kit";

/** What a sandbox asks of its cluster's forks. */
export interface ForkDesire {
  sandbox: string;
  routingKey: string;
  cluster: string;
  /** The last generation asked for (0: none). */
  generation: number;
  forks: pb.Fork[];
  /** Resources whose outputs the forks' env may read. */
  resources: string[];
  /** Force-deleted: nothing of it may stay on the cluster, though it asked nothing more. */
  gone: boolean;
  /** Deleted (forced or not): it asks nothing more, and once answered it leaves memory (see settled). */
  deleted: boolean;
  /**
   * Every namespace and kind any generation asked a fork in (`Deployment/shop`): where
   * something of the sandbox may be, even what a failed or interrupted apply wrote.
   */
  touched: string[];
  /** Earlier sandboxes of the same name that had forks (a force-deleted one may still have some on the cluster). */
  earlier: ForkDesire[];
}

export const noDesire = (): ForkDesire | undefined => undefined;

export function foldDesire(state: ForkDesire | undefined, event: DomainEvent): ForkDesire | undefined {
  switch (event.type) {
    case "ephemera.sandbox.created.v1":
      return {
        sandbox: event.data.name, routingKey: event.data.routingKey, cluster: event.data.spec?.cluster ?? "", generation: 0, forks: [], resources: [], gone: false, deleted: false, touched: [],
        earlier: state ? [...state.earlier, ...(state.generation > 0 ? [{ ...state, earlier: [] }] : [])] : [],
      };
    case "ephemera.sandbox.forks_requested.v1": {
      if (!state) return state;
      const touched = new Set([...state.touched, ...event.data.forks.map((f) => { const b = baselineOf(f.forkOf); return `${b.kind}/${b.namespace}`; })]);
      return { ...state, generation: event.data.generation, forks: event.data.forks, resources: event.data.resources, touched: [...touched].sort() };
    }
    case "ephemera.sandbox.deleted.v1":
      return state && { ...state, gone: event.data.forced, deleted: true };
    default:
      return state;
  }
}

/**
 * The generation to bring the cluster to, and its forks: a force-deleted sandbox's forks
 * are removed as one generation more, which nobody asked for but its runner records.
 */
export function target(d: ForkDesire): { generation: number; forks: pb.Fork[] } {
  return d.gone ? { generation: d.generation + 1, forks: [] } : { generation: d.generation, forks: d.forks };
}

/** What the runner recorded of one sandbox's forks. */
export interface ForkRecord {
  applied?: { generation: number; forks: pb.ForkPlacement[] };
  /** The last generation reported available, skipped or failed. */
  reported: number;
}

export const noRecord = (): ForkRecord => ({ reported: 0 });

export function foldRecord(state: ForkRecord, event: DomainEvent): ForkRecord {
  switch (event.type) {
    case "ephemera.forks.applied.v1":
      return { ...state, applied: { generation: event.data.generation, forks: event.data.forks } };
    case "ephemera.forks.available.v1":
    case "ephemera.forks.skipped.v1":
    case "ephemera.forks.failed.v1":
      return { ...state, reported: Math.max(state.reported, event.data.generation) };
    default:
      return state;
  }
}

export type ForkReport =
  | { kind: "applied"; forks: pb.ForkPlacement[] }
  | { kind: "available" }
  | { kind: "skipped"; message: string }
  | { kind: "failed"; failure: pb.ForkFailure };

/** Pure: the events recording a report of `generation`, none when it (or a later one) is recorded already. */
export function decideReport(state: ForkRecord, sandbox: string, generation: number, report: ForkReport): DomainEvent[] {
  if (state.reported >= generation) return [];
  switch (report.kind) {
    case "applied":
      return (state.applied?.generation ?? 0) >= generation ? [] : [ev("ephemera.forks.applied.v1", { sandbox, generation, forks: report.forks })];
    case "available": return [ev("ephemera.forks.available.v1", { sandbox, generation })];
    case "skipped": return [ev("ephemera.forks.skipped.v1", { sandbox, generation, message: report.message })];
    case "failed": return [ev("ephemera.forks.failed.v1", { sandbox, generation, failure: report.failure })];
  }
}

/** Whether the record still owes the desire something. */
export const behind = (d: ForkDesire, r: ForkRecord) => target(d).generation > r.reported && (d.generation > 0);

/**
 * Whether a desire is over: its sandbox is deleted and nothing is owed to it or to the earlier
 * sandboxes it carries. A normal deletion removed the forks before `sandbox.deleted` (the
 * generation it asked last has none, and is answered); a forced one is settled once the
 * generation that removes them is. Nothing more comes of it: it may leave memory.
 */
export function settled(d: ForkDesire, recordOf: (routingKey: string) => ForkRecord): boolean {
  return d.deleted && [d, ...d.earlier].every((e) => !behind(e, recordOf(e.routingKey)));
}
