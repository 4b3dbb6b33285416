// The sandbox service's core: the composition of its parts (core/, plugin/, sandbox/,
// routegroup/, jobrunnergroup/, job/, logs/) that the public API and the Routes API call.
import type * as pb from "@ephemera/proto";
import { Aggregates, type ValueJournal } from "@ephemera/events";
import type {
  Commit, EventStore, FollowOptions, LeaseStore, LogEntry, LogFollower, LogStore, ReadOptions, SnapshotStore, Subscription,
} from "@ephemera/eventstore";
import { randomToken, ulidGen, type Logger } from "@ephemera/kit";
import { commandMeta, type CallContext } from "./core/call.js";
import { SandboxProjections } from "./core/projections.js";
import { SandboxTimers } from "./core/timers.js";
import { PluginCommands } from "./plugin/commands.js";
import { removeUnusedVersions } from "./plugin/versions.js";
import { Admission, DEFAULT_ADMISSION, type AdmissionSettings } from "./sandbox/admission.js";
import { SandboxCommands } from "./sandbox/commands.js";
import { SandboxReactor } from "./sandbox/reactions.js";
import { SandboxViews } from "./sandbox/views.js";
import { SandboxWatchers, type Watcher } from "./sandbox/watchers.js";
import type { SandboxRecord } from "./sandbox/state.js";
import { logRunEnded, logRuns } from "./logs/runs.js";
import type { LogFilter, LogSelection } from "./logs/select.js";
import { RouteGroups } from "./routegroup/commands.js";
import { JobRunnerGroups } from "./jobrunnergroup/commands.js";
import { Jobs } from "./job/commands.js";
import { reconcileJobs } from "./job/reactions.js";
import type { PlacedSandbox } from "./routes/forks.js";

export type { CallContext } from "./core/call.js";
export { SANDBOX_TIMERS_LEASE } from "./core/timers.js";

export interface SandboxServiceDeps {
  store: EventStore;
  logs: LogStore;
  logger: Logger;
  /** Mints a routing key (random; injected so tests can pin it). */
  routingKey: () => string;
  /** The random suffix of generated job names (default: 8 lower-case letters and digits). */
  jobSuffix?: () => string;
  /** How long a pod has to report a cancelled job before the server ends it (default 10 s). */
  jobCancelGraceMs?: number;
  /** How long past its group's jobTimeout a running job's pod has to report it before the server fails it (default 60 s). */
  jobTimeoutGraceMs?: number;
  /** Base domain of endpoint URLs. */
  previewDomain: string;
  now?: () => number;
  /** The output journal, read for `sandbox get --show-outputs`. */
  values: ValueJournal;
  /** Where the projections' snapshot is kept, and the code's fingerprint (codeFingerprint); absent: the stream is replayed at each start. */
  snapshots?: { store: SnapshotStore; fingerprint: string };
  /**
   * Where the replicas hold the timers' lease (TTL expiries and job deadlines fire in one
   * replica at a time). Absent: a store of this process's own, so it is the only holder.
   */
  leases?: LeaseStore;
  /** How long the timers' lease lasts unless renewed (default 10 s): how soon another replica takes over a dead one's timers. */
  leaseTtlMs?: number;
  /** How long a read waits for this replica to have applied what the store holds (default 5 s). */
  freshnessTimeoutMs?: number;
  /** When a create waits under a burst (sandbox/admission.ts; default DEFAULT_ADMISSION). */
  admission?: AdmissionSettings;
}

/** How long a read waits for the store to say its position before it reads the projections as they stand. */
const POSITION_DEADLINE_MS = 1000;

/**
 * One replica of the sandbox service. What it holds in memory is what is live (see
 * SandboxProjections); its reads wait for what the store held when asked (readYourWrites).
 */
export class SandboxCore {
  readonly projections: SandboxProjections;
  readonly plugins: SandboxProjections["plugins"];
  readonly sandboxes: SandboxProjections["sandboxes"];
  readonly workflows: SandboxProjections["workflows"];
  readonly forks: SandboxProjections["forks"];
  readonly locals: SandboxProjections["locals"];
  readonly routeGroupStates: SandboxProjections["routeGroupStates"];
  readonly jobRunnerGroupStates: SandboxProjections["jobRunnerGroupStates"];
  readonly jobRunnerGroupPods: SandboxProjections["jobRunnerGroupPods"];
  readonly jobStates: SandboxProjections["jobStates"];
  readonly feed: SandboxProjections["feed"];
  /** Route groups: routing contexts of the sandboxes whose labels match. */
  readonly routeGroups: RouteGroups;
  /** Job runner groups: pods kept ready to run jobs. */
  readonly jobRunnerGroups: JobRunnerGroups;
  /** Jobs: scripts or commands queued for, and run on, the pods of a job runner group. */
  readonly jobs: Jobs;
  /** The TTL index and the timers' lease (whose holder also applies the job rules). */
  readonly timers: SandboxTimers;
  private readonly pluginCommands: PluginCommands;
  private readonly sandboxCommands: SandboxCommands;
  private readonly views: SandboxViews;
  private readonly watchers: SandboxWatchers;
  /** Creates held under a burst, and the sandboxes created and not yet started that they wait on. */
  readonly admission: Admission;
  private readonly reactor: SandboxReactor;
  /** Set once the replay at start is done: the server's own job rules apply from then on. */
  private jobsLive = false;
  private readonly now: () => number;
  private readonly newId = ulidGen();

  constructor(readonly deps: SandboxServiceDeps) {
    this.now = deps.now ?? Date.now;
    const { store, logger } = deps;
    const projections = (this.projections = new SandboxProjections(store, logger, deps.snapshots));
    ({
      plugins: this.plugins, sandboxes: this.sandboxes, workflows: this.workflows, forks: this.forks, locals: this.locals,
      routeGroupStates: this.routeGroupStates, jobRunnerGroupStates: this.jobRunnerGroupStates,
      jobRunnerGroupPods: this.jobRunnerGroupPods, jobStates: this.jobStates, feed: this.feed,
    } = projections);
    const meta = (call: CallContext, command: string) => this.meta(call, command);
    const readYourWrites = () => this.readYourWrites();
    const removeUnused = (plugin: string) =>
      removeUnusedVersions({ store, plugins: this.plugins, sandboxes: this.sandboxes, feed: this.feed, readYourWrites }, plugin);

    this.views = new SandboxViews({ store, projections, values: deps.values, logger });
    this.watchers = new SandboxWatchers(projections, this.views);
    this.pluginCommands = new PluginCommands({
      store, plugins: this.plugins, sandboxes: this.sandboxes, meta, readYourWrites, removeUnusedVersions: removeUnused,
    });
    this.admission = new Admission(projections, deps.admission ?? DEFAULT_ADMISSION);
    this.sandboxCommands = new SandboxCommands({
      store, projections, views: this.views, logger, meta, readYourWrites, routingKey: deps.routingKey, previewDomain: deps.previewDomain,
      admission: this.admission,
    });
    this.reactor = new SandboxReactor({ store, projections, removeUnusedVersions: removeUnused });
    this.jobRunnerGroups = new JobRunnerGroups({ store, projection: this.jobRunnerGroupStates, pods: this.jobRunnerGroupPods });
    this.jobs = new Jobs({
      store, projection: this.jobStates, logger, random: deps.jobSuffix ?? (() => randomToken(8)),
      groupExists: (name) => this.jobRunnerGroupStates.get(name)?.state.status === "active",
      routingKeyOf: (kind, name) => {
        const state = kind === "sandbox" ? this.sandboxes.get(name)?.state : this.routeGroupStates.get(name)?.state;
        return state?.status === "active" ? state.routingKey : undefined;
      },
      ...(deps.now ? { now: deps.now } : {}),
      ...(deps.jobCancelGraceMs !== undefined ? { cancelGraceMs: deps.jobCancelGraceMs } : {}),
      groupTimeout: (group) => {
        const state = this.jobRunnerGroupStates.get(group)?.state;
        return state && state.status !== "none" ? state.spec.jobTimeout : undefined;
      },
      ...(deps.jobTimeoutGraceMs !== undefined ? { timeoutGraceMs: deps.jobTimeoutGraceMs } : {}),
      acting: () => this.timers.held,
    });
    this.routeGroups = new RouteGroups({
      store, projection: this.routeGroupStates, sandboxes: () => this.placedSandboxes(),
      routingKey: deps.routingKey, previewDomain: deps.previewDomain,
    });
    this.timers = new SandboxTimers({
      store, sandboxes: this.sandboxes, logger, now: this.now,
      ...(deps.leases ? { leases: deps.leases } : {}),
      ...(deps.leaseTtlMs !== undefined ? { leaseTtlMs: deps.leaseTtlMs } : {}),
      onAcquired: () => void this.jobs.reconcileAll(),
      onLost: () => this.jobs.pause(),
    });
    this.feed.onCommit((c) => {
      if (c.aggregate === Aggregates.sandbox && projections.track(c.aggregateId)) this.views.forget(c.aggregateId);
      this.watchers.notify(c);
      if (this.jobsLive) reconcileJobs(this.jobs, c);
      if (c.aggregate === Aggregates.sandbox) this.timers.track(c.aggregateId);
      const sandbox = c.aggregate === Aggregates.sandbox || c.aggregate === Aggregates.workflow ? projections.sandboxOf(c) : undefined;
      if (sandbox !== undefined) this.admission.observe(sandbox);
    });
  }

  async start(): Promise<void> {
    await this.feed.start();
    this.admission.rebuild();
    this.jobsLive = true;
    await this.reactor.reconcileHeld();
    this.timers.start();
    this.reactor.start(this.feed.position);
  }

  /** Whether this replica fires the timers now (holds their lease). */
  get firesTimers(): boolean {
    return this.timers.held;
  }

  /**
   * Waits until this replica's projections hold everything the store held when asked (one
   * request for the store's position): what a client wrote through any replica is then read
   * here. Resolves to that position; UnavailableError past the deadline. When the store does
   * not say its position within a second (NATS paused, or this replica cut off from it),
   * the projections are read as they stand: reads stay up through an outage, and may then
   * miss a write made through another replica until this one reaches the store again.
   */
  async readYourWrites(): Promise<number> {
    let timer: NodeJS.Timeout | undefined;
    const unanswered = new Promise<undefined>((resolve) => { timer = setTimeout(() => resolve(undefined), POSITION_DEADLINE_MS); });
    const at = await Promise.race([this.deps.store.position().catch(() => undefined), unanswered]).finally(() => clearTimeout(timer));
    if (at === undefined) return this.feed.position;
    await this.feed.waitFor(at, this.deps.freshnessTimeoutMs ?? 5_000);
    return at;
  }

  async stop(): Promise<void> {
    this.admission.close();
    this.jobs.stop();
    await this.timers.stop();
    await this.reactor.stop();
    await this.feed.stop();
    this.watchers.close();
  }

  /** What a command's commit records: its source, command, correlation id and actor. */
  meta(call: CallContext, command: string) {
    return commandMeta(call, command, this.newId);
  }

  nowMs(): number {
    return this.now();
  }

  // ---- plugins (plugin/commands.ts) ----

  applyPlugin(request: pb.ResourcePlugin | undefined, call: CallContext = {}, dryRun = false) {
    return this.pluginCommands.apply(request, call, dryRun);
  }

  getPlugin(refText: string): pb.ResourcePluginVersion {
    return this.pluginCommands.get(refText);
  }

  listPlugins(request: Partial<pb.ListResourcePluginsRequest> = {}): pb.ListResourcePluginsResponse {
    return this.pluginCommands.list(request);
  }

  deletePlugin(refText: string, call: CallContext = {}): Promise<string[]> {
    return this.pluginCommands.delete(refText, call);
  }

  // ---- sandboxes (sandbox/commands.ts, sandbox/views.ts, sandbox/watchers.ts) ----

  applySandbox(request: pb.Sandbox | undefined, call: CallContext = {}, dryRun = false): Promise<pb.ApplySandboxResponse> {
    return this.sandboxCommands.apply(request, call, dryRun);
  }

  deleteSandbox(name: string, force: boolean, call: CallContext = {}): Promise<pb.SandboxView> {
    return this.sandboxCommands.delete(name, force, call);
  }

  /** Runs the failed resources' create workflows again; returns their names. */
  retrySandbox(name: string, call: CallContext = {}): Promise<pb.RetrySandboxResponse> {
    return this.sandboxCommands.retry(name, call);
  }

  view(name: string, showOutputs: boolean): Promise<pb.SandboxView> {
    return this.views.view(name, showOutputs);
  }

  list(): pb.SandboxView[] {
    return this.views.list();
  }

  /** Where the sandbox's forks are on its cluster (see SandboxViews.forkPlacements). */
  forkPlacements(state: SandboxRecord): pb.ForkPlacement[] {
    return this.views.forkPlacements(state);
  }

  /** Every live sandbox with its forks' placements, connected locals and their Services. */
  placedSandboxes(): Iterable<PlacedSandbox> {
    return this.views.placed();
  }

  /** Calls `watcher` with the view after every change to the sandbox, and with undefined once it is gone. */
  watch(name: string, watcher: Watcher): () => void {
    return this.watchers.watch(name, watcher);
  }

  /** Called after every change to a sandbox's routing is folded in (the Routes API's watchers). */
  onSandboxChange(listener: () => void): () => void {
    return this.watchers.onRoutingChange(listener);
  }

  // ---- logs (logs/runs.ts) and events ----

  /** The runs whose logs a request reads, and whether more may still start (see logs/runs.ts). */
  logRuns(sandbox: string, resource: string, filter: LogFilter): Promise<LogSelection> {
    return logRuns(this.deps.store, this.projections, sandbox, resource, filter);
  }

  /** Whether a run is over, as its workflow records it. */
  runEnded(runId: string): boolean {
    return logRunEnded(this.projections, runId);
  }

  /** A run's log as stored so far, entry by entry. */
  logEntries(runId: string, options: ReadOptions): Promise<LogEntry[]> {
    return this.deps.logs.entries(runId, options);
  }

  /** A run's log, then what is appended to it, until its end (see LogStore.follow). */
  followLog(runId: string, options: ReadOptions, onEntry: (entry: LogEntry) => void): LogFollower {
    return this.deps.logs.follow(runId, options, onEntry);
  }

  /**
   * The commits from `start` on, then live ones (the audit stream of EventService). The
   * store reads the next commit only once `handler`'s promise settles: a slow reader holds
   * the stream back instead of having it buffered.
   */
  followEvents(start: Pick<FollowOptions, "from" | "since">, handler: (commit: Commit) => Promise<void>): Subscription {
    return this.deps.store.follow(start, handler);
  }
}
