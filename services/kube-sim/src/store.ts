// The object store: every object of every type, one global resourceVersion counter, and a
// bounded history of changes from which watches resume. A watch from a resourceVersion
// older than the history (or than a forced compaction) is told 410 Gone, as etcd's
// compaction makes the real server answer.
import type { ResourceType } from "./resources.js";
import { keyOf } from "./resources.js";

export type Obj = Record<string, unknown> & { metadata: Meta };
export interface Meta {
  name: string;
  namespace?: string;
  uid: string;
  resourceVersion: string;
  creationTimestamp: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  [k: string]: unknown;
}

export type EventType = "ADDED" | "MODIFIED" | "DELETED";
export interface Change {
  rv: number;
  type: EventType;
  resource: string;
  object: Obj;
  /** The object before a MODIFIED, so a selecting watch can tell it left or entered the selection. */
  previous?: Obj;
}

export type Listener = (change: Change) => void;

export class Store {
  private rv = 0;
  private readonly objects = new Map<string, Map<string, Obj>>();
  private readonly history: Change[] = [];
  /** Watches from a resourceVersion below this are too old. */
  private compactedRv = 0;
  private readonly listeners = new Set<Listener>();

  constructor(private readonly historySize: number) {}

  get resourceVersion(): number { return this.rv; }
  get compacted(): number { return this.compactedRv; }

  nextRv(): string { return String(++this.rv); }

  private table(type: ResourceType): Map<string, Obj> {
    const key = keyOf(type);
    let t = this.objects.get(key);
    if (!t) this.objects.set(key, (t = new Map()));
    return t;
  }

  get(type: ResourceType, namespace: string | undefined, name: string): Obj | undefined {
    return this.table(type).get(`${namespace ?? ""}/${name}`);
  }

  list(type: ResourceType, namespace?: string): Obj[] {
    const all = [...this.table(type).values()];
    return namespace === undefined ? all : all.filter((o) => o.metadata.namespace === namespace);
  }

  /** Writes `object` (its resourceVersion is set here) and records the change. */
  put(type: ResourceType, object: Obj): Obj {
    const t = this.table(type);
    const key = `${object.metadata.namespace ?? ""}/${object.metadata.name}`;
    const previous = t.get(key);
    const rv = this.rv + 1;
    this.rv = rv;
    const stored = { ...object, metadata: { ...object.metadata, resourceVersion: String(rv) } } as Obj;
    t.set(key, stored);
    this.record({ rv, type: previous ? "MODIFIED" : "ADDED", resource: keyOf(type), object: stored, ...(previous ? { previous } : {}) });
    return stored;
  }

  remove(type: ResourceType, namespace: string | undefined, name: string): Obj | undefined {
    const t = this.table(type);
    const key = `${namespace ?? ""}/${name}`;
    const previous = t.get(key);
    if (!previous) return undefined;
    t.delete(key);
    const rv = ++this.rv;
    // A deleted object is sent with the resourceVersion of its deletion, as the real server does.
    const object = { ...previous, metadata: { ...previous.metadata, resourceVersion: String(rv) } } as Obj;
    this.record({ rv, type: "DELETED", resource: keyOf(type), object, previous });
    return object;
  }

  private record(change: Change): void {
    this.history.push(change);
    while (this.history.length > this.historySize) this.compactedRv = this.history.shift()!.rv;
    for (const l of this.listeners) l(change);
  }

  /** Everything before now becomes too old to watch from. */
  compact(): void {
    this.history.length = 0;
    this.compactedRv = this.rv;
  }

  /** Changes after `rv`, or undefined when some of them are no longer kept. */
  since(rv: number): Change[] | undefined {
    if (rv < this.compactedRv) return undefined;
    return this.history.filter((c) => c.rv > rv);
  }

  subscribe(l: Listener): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }
}
