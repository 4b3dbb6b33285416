// The sandbox service's read models: one projection per aggregate it reads, all fed by one
// Feed, and the index of live sandboxes by routing key that decides what leaves memory.
import { Aggregates, folding } from "@ephemera/events";
import { Feed, Projection, type Commit, type EventStore, type SnapshotStore } from "@ephemera/eventstore";
import type { Logger } from "@ephemera/kit";
import { isTerminal } from "@ephemera/scheduler/decider";
import { evolvePlugin, initialPlugin, type PluginState } from "../plugin/state.js";
import { evolveProgress, initialProgress, type WorkflowProgress } from "../workflow/progress.js";
import { evolveSandbox, initialSandbox, type SandboxState } from "../sandbox/state.js";
import { foldForkFacts, noForkFacts, type ForkFacts } from "../sandbox/forks.js";
import { foldLocalLinks, noLocalLinks, type LocalLinks } from "../sandbox/locals.js";
import { evolveJobRunnerGroup, initialJobRunnerGroup, type JobRunnerGroupState } from "../jobrunnergroup/state.js";
import { foldGroupPods, type GroupPodsReport } from "../jobrunnergroup/view.js";
import { evolveJobRecorded, initialJob, type JobState } from "../job/state.js";
import { evolveRouteGroup, initialRouteGroup, type RouteGroupState } from "../routegroup/state.js";

/** The routing key a workflow, step run, forks or locals id begins with. */
export const routingKeyOf = (id: string) => id.split(".")[0]!;

/**
 * What is held in memory is what is live: a deleted sandbox, a plugin with no version left,
 * and the workflows, forks and locals of a routing key no live sandbox has are retired
 * (read from the store on demand when the API names them).
 */
export class SandboxProjections {
  readonly plugins = new Projection<PluginState>(Aggregates.plugin, initialPlugin, folding(evolvePlugin), {
    retired: (s) => s.versions.size === 0,
  });
  readonly sandboxes = new Projection<SandboxState>(Aggregates.sandbox, initialSandbox, folding(evolveSandbox), {
    retired: (s) => s.status === "deleted",
  });
  readonly workflows = new Projection<WorkflowProgress>(Aggregates.workflow, initialProgress, folding(evolveProgress), {
    retired: (s, id) => isTerminal(s.status) && !this.isLive(routingKeyOf(id)),
  });
  /** The runners' reports of the sandboxes' forks, by routing key. */
  readonly forks = new Projection<ForkFacts>(Aggregates.forks, noForkFacts, folding(foldForkFacts), {
    retired: (_, key) => !this.isLive(key),
  });
  /** The tunnel's word on which local workloads a workstation serves, by routing key. */
  readonly locals = new Projection<LocalLinks>(Aggregates.locals, noLocalLinks, folding(foldLocalLinks), {
    retired: (_, key) => !this.isLive(key),
  });
  /**
   * A deleted route group leaves memory: the API answers it NotFound, as one never made, and a
   * group applied again under its name is created anew. Deleted job runner groups stay: their
   * jobs still running take the group's jobTimeout.
   */
  readonly routeGroupStates = new Projection<RouteGroupState>(Aggregates.routegroup, initialRouteGroup, folding(evolveRouteGroup), { retired: (s) => s.status === "deleted" });
  readonly jobRunnerGroupStates = new Projection<JobRunnerGroupState>(
    Aggregates.jobrunnergroup, initialJobRunnerGroup, folding(evolveJobRunnerGroup),
  );
  /** The runners' reports of the job runner groups' ready pods, by group. */
  readonly jobRunnerGroupPods = new Projection<GroupPodsReport>(Aggregates.jobpods, () => undefined, folding(foldGroupPods));
  readonly jobStates = new Projection<JobState>(Aggregates.job, initialJob, evolveJobRecorded);
  readonly feed: Feed;
  /** Routing key → name of each live sandbox. */
  private readonly byRoutingKey = new Map<string, string>();

  constructor(store: EventStore, logger: Logger, snapshots?: { store: SnapshotStore; fingerprint: string }) {
    this.feed = new Feed(
      store,
      [
        this.plugins, this.sandboxes, this.workflows, this.forks, this.routeGroupStates, this.locals,
        this.jobRunnerGroupStates, this.jobRunnerGroupPods, this.jobStates,
      ],
      logger,
      snapshots && { ...snapshots, name: "sandbox" },
    );
    this.feed.onRestore(() => {
      for (const [name, { state }] of this.sandboxes.entries()) {
        if (state.status !== "none") this.byRoutingKey.set(state.routingKey, name);
      }
    });
  }

  /** Whether a live sandbox has this routing key. */
  isLive(routingKey: string): boolean {
    return this.byRoutingKey.has(routingKey);
  }

  /** The live sandbox a commit concerns, if any. */
  sandboxOf(c: Commit): string | undefined {
    if (c.aggregate === Aggregates.sandbox) return c.aggregateId;
    const keyed = c.aggregate === Aggregates.workflow || c.aggregate === Aggregates.steprun
      || c.aggregate === Aggregates.forks || c.aggregate === Aggregates.locals;
    return keyed ? this.byRoutingKey.get(routingKeyOf(c.aggregateId)) : undefined;
  }

  /**
   * Keeps the routing key index to the live sandboxes after a change to sandbox `name`; a
   * sandbox gone retires what its routing key held. True when the sandbox has just gone.
   */
  track(name: string): boolean {
    const live = this.sandboxes.get(name)?.state;
    if (live && live.status !== "none") {
      this.byRoutingKey.set(live.routingKey, name);
      return false;
    }
    const gone = this.sandboxes.latest(name)?.state;
    if (!gone || gone.status === "none" || this.byRoutingKey.get(gone.routingKey) !== name) return false;
    this.byRoutingKey.delete(gone.routingKey);
    this.forks.retire(gone.routingKey);
    this.locals.retire(gone.routingKey);
    for (const [id, { state }] of this.workflows.entries()) {
      if (routingKeyOf(id) === gone.routingKey && isTerminal(state.status)) this.workflows.retire(id);
    }
    return true;
  }
}
