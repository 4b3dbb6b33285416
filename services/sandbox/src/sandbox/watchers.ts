// Who is told of changes to sandboxes: the API's watchers of one sandbox (given its view
// after each change) and the listeners to any change of routing (the Routes API).
import type * as pb from "@ephemera/proto";
import { Aggregates } from "@ephemera/events";
import type { Commit } from "@ephemera/eventstore";
import type { SandboxProjections } from "../core/projections.js";
import type { SandboxViews } from "./views.js";

export type Watcher = (view: pb.SandboxView | undefined) => void;

/** The aggregates whose changes move routes: sandboxes, their forks and locals, route groups. */
const ROUTING = new Set<string>([Aggregates.sandbox, Aggregates.forks, Aggregates.routegroup, Aggregates.locals]);

export class SandboxWatchers {
  private readonly watchers = new Map<string, Set<Watcher>>();
  private readonly listeners = new Set<() => void>();

  constructor(private readonly projections: SandboxProjections, private readonly views: SandboxViews) {}

  /** Calls `watcher` with the view after every change to the sandbox, and with undefined once it is gone. */
  watch(name: string, watcher: Watcher): () => void {
    let set = this.watchers.get(name);
    if (!set) this.watchers.set(name, (set = new Set()));
    set.add(watcher);
    return () => { set.delete(watcher); };
  }

  /** Calls `listener` after every change to a sandbox's routing is folded in. */
  onRoutingChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Tells the watchers of the sandbox a folded commit concerns, then the routing listeners. */
  notify(c: Commit): void {
    this.tellWatchers(c);
    if (ROUTING.has(c.aggregate)) for (const listener of this.listeners) listener();
  }

  /** Tells every watcher the sandboxes are gone (the service stops). */
  close(): void {
    for (const set of this.watchers.values()) for (const w of set) w(undefined);
  }

  private tellWatchers(c: Commit): void {
    const name = this.projections.sandboxOf(c);
    const set = name ? this.watchers.get(name) : undefined;
    if (!name || !set?.size) return;
    const state = this.projections.sandboxes.get(name)?.state;
    const view = state && state.status !== "deleted" && state.status !== "none" ? this.views.build(state, undefined) : undefined;
    for (const w of set) w(view);
  }
}
