// The local workloads' reconciler's folds: what each sandbox's spec says of its local
// workloads (its sandbox events), which of them a workstation serves now and where the tunnel
// reaches it (the tunnel's locals events, one aggregate per routing key), and what the runner
// last recorded of the locals' Services (its forks aggregate), with the decision recording it.
import * as pb from "@ephemera/proto";
import { ev, type DomainEvent } from "@ephemera/events";
import { baselineOf } from "@ephemera/kit";

export interface LocalDesire {
  sandbox: string;
  routingKey: string;
  cluster: string;
  locals: pb.Local[];
  /** Being deleted or gone: nothing of its locals may stay on the cluster. */
  ending: boolean;
  /** Deleted: once none of its locals' Services is recorded on the cluster, it leaves memory (see settledLocals). */
  deleted: boolean;
  /** Every namespace any local of it was ever in: where its objects may be. */
  namespaces: string[];
}

export const noLocalDesire = (): LocalDesire | undefined => undefined;

export function foldLocalDesire(state: LocalDesire | undefined, event: DomainEvent): LocalDesire | undefined {
  const withSpec = (d: LocalDesire, spec: pb.SandboxSpec | undefined): LocalDesire => {
    const locals = spec?.local ?? [];
    return { ...d, locals, namespaces: [...new Set([...d.namespaces, ...locals.map((l) => baselineOf(l.from).namespace)])].sort() };
  };
  switch (event.type) {
    case "ephemera.sandbox.created.v1":
      return withSpec({ sandbox: event.data.name, routingKey: event.data.routingKey, cluster: event.data.spec?.cluster ?? "", locals: [], ending: false, deleted: false, namespaces: [] }, event.data.spec);
    case "ephemera.sandbox.updated.v1":
      return state && withSpec(state, event.data.spec);
    case "ephemera.sandbox.deleting.v1":
      return state && { ...state, ending: true };
    case "ephemera.sandbox.deleted.v1":
      return state && { ...state, ending: true, deleted: true };
    default:
      return state;
  }
}

/** Local workload name → the session serving it and where the tunnel reaches it. */
export type Served = Map<string, { sessionId: string; addresses: pb.LocalAddress[] }>;

export const noServed = (): Served => new Map();

export function foldServed(state: Served, event: DomainEvent): Served {
  switch (event.type) {
    case "ephemera.locals.connected.v1":
      return new Map(state).set(event.data.local, { sessionId: event.data.sessionId, addresses: event.data.addresses });
    case "ephemera.locals.disconnected.v1": {
      // A session's late word never undoes a newer session's connection.
      const now = state.get(event.data.local);
      if (now && event.data.sessionId && now.sessionId !== event.data.sessionId) return state;
      const next = new Map(state);
      next.delete(event.data.local);
      return next;
    }
    default:
      return state;
  }
}

export interface ServedLocal {
  local: pb.Local;
  sessionId: string;
  addresses: pb.LocalAddress[];
}

/** Pure: the locals to keep on the cluster: those of the spec a workstation serves, while the sandbox lives. */
export function servedLocals(d: LocalDesire, served: Served | undefined): ServedLocal[] {
  if (d.ending) return [];
  return d.locals.flatMap((local) => {
    const s = served?.get(local.name);
    return s ? [{ local, ...s }] : [];
  });
}

/** The runner's last record of the locals' Services (undefined: none yet). */
export type LocalRecord = pb.LocalPlacement[] | undefined;

export const noLocalRecord = (): LocalRecord => undefined;

export function foldLocalRecord(state: LocalRecord, event: DomainEvent): LocalRecord {
  return event.type === "ephemera.forks.locals_applied.v1" ? event.data.locals : state;
}

/** Pure: the event recording the locals placed, none when the record says so already. */
export function decideLocals(state: LocalRecord, sandbox: string, locals: pb.LocalPlacement[]): DomainEvent[] {
  const same = (a: pb.LocalPlacement[], b: pb.LocalPlacement[]) =>
    Buffer.from(pb.LocalsApplied.encode({ sandbox, locals: a }).finish()).equals(Buffer.from(pb.LocalsApplied.encode({ sandbox, locals: b }).finish()));
  if (state ? same(state, locals) : locals.length === 0) return [];
  return [ev("ephemera.forks.locals_applied.v1", { sandbox, locals })];
}

/** Pure: whether a desire is over: its sandbox deleted and no local's Service recorded on the cluster (none ever, or all removed). */
export const settledLocals = (d: LocalDesire, record: LocalRecord) => d.deleted && !record?.length;
