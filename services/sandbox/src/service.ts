// The sandbox service's core: projections of plugins, sandboxes and workflows, the
// commands behind the public API, and the reaction to workflow outcomes.
import * as pb from "@ephemera/proto";
import { Aggregates, decode, encode, folding, journaledValues, parseRunId, workflowId, type DomainEvent, type ValueJournal } from "@ephemera/events";
import { evolvePlugin, initialPlugin, type PluginState } from "./plugin/state.js";
import { isTerminal } from "@ephemera/scheduler/decider";
import { evolveProgress, initialProgress, type WorkflowProgress } from "./workflow/progress.js";
import { evolveSandbox, initialSandbox, type SandboxRecord, type SandboxState } from "./sandbox/state.js";
import {
  Feed, Projection, execute, type Commit, type EventStore, type LogEntry, type LogFollower, type LogStore, type ReadOptions, type Subscription,
} from "@ephemera/eventstore";
import { DueIndex, NotFoundError, randomToken, ValidationError, errorMessage, ulidGen, type FieldViolation, type Logger } from "@ephemera/kit";
import {
  checkSandboxAgainstPlugins, parsePluginRef, pluginDigest, pluginToDoc, sandboxToDoc, validatePlugin, validateSandbox,
} from "@ephemera/spec";
import semver from "semver";
import { decidePlugin } from "./plugin/decide.js";
import { decideSandbox, scheduledDeleteTime, type SandboxCommand } from "./sandbox/decide.js";
import { KeyedLock } from "@ephemera/kit";
import { buildView, safeView } from "./sandbox/view.js";
import { foldForkFacts, noForkFacts, type ForkFacts } from "./sandbox/forks.js";
import { connectedLocals, foldLocalLinks, noLocalLinks, type LocalLinks } from "./sandbox/locals.js";
import { runEnded, selectRuns, type LogFilter, type LogSelection } from "./logs/select.js";
import { baselineUrl, endpointUrls } from "./sandbox/endpoints.js";
import { RouteGroups } from "./routegroup/commands.js";
import { JobRunnerGroups } from "./jobrunnergroup/commands.js";
import { evolveJobRunnerGroup, initialJobRunnerGroup, type JobRunnerGroupState } from "./jobrunnergroup/state.js";
import { foldGroupPods, type GroupPodsReport } from "./jobrunnergroup/view.js";
import { Jobs } from "./job/commands.js";
import { evolveJobRecorded, initialJob, type JobState } from "./job/state.js";
import type { PlacedSandbox } from "./routes/forks.js";
import { evolveRouteGroup, initialRouteGroup, type RouteGroupState } from "./routegroup/state.js";

export { baselineUrl };

const DEFAULT_PAGE = 100;
const MAX_PAGE = 500;

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
}

/** Who asked, and the id every event the call causes carries as its correlation id. */
export interface CallContext {
  actor?: string;
  correlationId?: string;
}

type Watcher = (view: pb.SandboxView | undefined) => void;

export class SandboxCore {
  readonly plugins = new Projection<PluginState>(Aggregates.plugin, initialPlugin, folding(evolvePlugin));
  readonly sandboxes = new Projection<SandboxState>(Aggregates.sandbox, initialSandbox, folding(evolveSandbox));
  readonly workflows = new Projection<WorkflowProgress>(Aggregates.workflow, initialProgress, folding(evolveProgress));
  /** The runners' reports of the sandboxes' forks, by routing key. */
  readonly forks = new Projection<ForkFacts>(Aggregates.forks, noForkFacts, folding(foldForkFacts));
  /** The tunnel's word on which local workloads a workstation serves, by routing key. */
  readonly locals = new Projection<LocalLinks>(Aggregates.locals, noLocalLinks, folding(foldLocalLinks));
  readonly routeGroupStates = new Projection<RouteGroupState>(Aggregates.routegroup, initialRouteGroup, folding(evolveRouteGroup));
  /** Route groups: routing contexts of the sandboxes whose labels match. */
  readonly routeGroups: RouteGroups;
  readonly jobRunnerGroupStates = new Projection<JobRunnerGroupState>(Aggregates.jobrunnergroup, initialJobRunnerGroup, folding(evolveJobRunnerGroup));
  /** The runners' reports of the job runner groups' ready pods, by group. */
  readonly jobRunnerGroupPods = new Projection<GroupPodsReport>(Aggregates.jobpods, () => undefined, folding(foldGroupPods));
  /** Job runner groups: pods kept ready to run jobs. */
  readonly jobRunnerGroups: JobRunnerGroups;
  readonly jobStates = new Projection<JobState>(Aggregates.job, initialJob, evolveJobRecorded);
  /** Jobs: scripts or commands queued for, and run on, the pods of a job runner group. */
  readonly jobs: Jobs;
  /** Set once the replay at start is done: the server's own job rules apply from then on. */
  private jobsLive = false;
  readonly feed: Feed;
  private readonly byRoutingKey = new Map<string, string>();
  private readonly watchers = new Map<string, Set<Watcher>>();
  private subscription?: Subscription;
  /** Applying a sandbox and removing a plugin version never interleave for one plugin. */
  private readonly pluginLocks = new KeyedLock();
  private readonly ttl: DueIndex;
  private readonly now: () => number;
  private readonly newId = ulidGen();
  /** Sandboxes whose view could not be built, by name and problem, already logged. */
  /** Sandbox name → the last problem logged for it: as many entries as sandboxes held, at most. */
  private readonly unrenderable = new Map<string, string>();

  constructor(readonly deps: SandboxServiceDeps) {
    this.now = deps.now ?? Date.now;
    this.feed = new Feed(deps.store, [this.plugins, this.sandboxes, this.workflows, this.forks, this.routeGroupStates, this.locals, this.jobRunnerGroupStates, this.jobRunnerGroupPods, this.jobStates], deps.logger);
    this.jobRunnerGroups = new JobRunnerGroups({ store: deps.store, projection: this.jobRunnerGroupStates, pods: this.jobRunnerGroupPods });
    this.jobs = new Jobs({
      store: deps.store, projection: this.jobStates, logger: deps.logger, random: deps.jobSuffix ?? (() => randomToken(8)),
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
    });
    this.routeGroups = new RouteGroups({
      store: deps.store, projection: this.routeGroupStates, sandboxes: () => this.placedSandboxes(),
      routingKey: deps.routingKey, previewDomain: deps.previewDomain,
    });
    this.ttl = new DueIndex((names, now) => this.expire(names, now), this.now);
    this.feed.onCommit((c) => {
      this.notify(c);
      if (this.jobsLive) this.reconcileJobs(c);
      const routing = c.aggregate === Aggregates.sandbox || c.aggregate === Aggregates.forks || c.aggregate === Aggregates.routegroup
        || c.aggregate === Aggregates.locals;
      if (routing) for (const l of this.sandboxListeners) l();
      if (c.aggregate !== Aggregates.sandbox) return;
      const state = this.sandboxes.get(c.aggregateId)?.state;
      this.ttl.set(c.aggregateId, state?.status === "active" ? scheduledDeleteTime(state) : undefined);
    });
  }

  async start(): Promise<void> {
    await this.feed.start();
    this.jobsLive = true;
    await this.jobs.reconcileAll();
    for (const [name] of this.sandboxes.entries()) await this.reconcile(name);
    for (const [name] of this.plugins.entries()) await this.removeUnusedVersions(name);
    this.ttl.arm();
    this.subscription = this.deps.store.subscribe({ durable: "sandbox", from: this.feed.position }, async (c) => {
      await this.feed.waitFor(c.position);
      const name = this.sandboxOf(c);
      const first = c.events[0];
      if (name) await this.reconcile(name, first && { correlationId: first.correlationId, causationId: first.id });
      // A sandbox that went away may free a plugin version being deleted.
      const gone = c.aggregate === Aggregates.sandbox ? this.sandboxes.get(c.aggregateId)?.state : undefined;
      if (gone?.status === "deleted") {
        for (const r of gone.resources) await this.removeUnusedVersions(r.plugin);
      }
      if (c.aggregate === Aggregates.plugin) await this.removeUnusedVersions(c.aggregateId);
    });
  }

  private async expire(names: string[], now: number): Promise<void> {
    for (const name of names) {
      try {
        await execute(this.deps.store, this.sandboxes, name, (state) => decideSandbox({ kind: "expire", now }, state).map(encode),
          { source: "sandbox", command: "expire", actor: "ttl" });
        this.deps.logger.info({ sandbox: name }, "sandbox TTL expired; deleting it");
      } catch (err) {
        this.deps.logger.warn({ err, sandbox: name }, "TTL expiry failed; will try again");
      }
    }
  }

  /** Removes the versions of a plugin that are being deleted and that no sandbox uses any more. */
  private async removeUnusedVersions(plugin: string): Promise<void> {
    const state = this.plugins.get(plugin)?.state;
    if (![...(state?.versions.values() ?? [])].some((v) => v.deleting)) return;
    await this.pluginLocks.run([plugin], () => execute(this.deps.store, this.plugins, plugin, (s) => {
      const inUse = [...s.versions.keys()].filter((v) => this.sandboxesUsing(plugin, v).length > 0);
      return decidePlugin({ kind: "remove-unused", inUse }, s).map(encode);
    }, { source: "sandbox", command: "remove-unused" }));
  }

  async stop(): Promise<void> {
    this.ttl.stop();
    this.jobs.stop();
    await this.subscription?.stop();
    await this.feed.stop();
    for (const set of this.watchers.values()) for (const w of set) w(undefined);
  }

  // ---- plugins ----

  async applyPlugin(request: pb.ResourcePlugin | undefined, call: CallContext = {}, dryRun = false): Promise<{ plugin: pb.ResourcePluginVersion; unchanged: boolean }> {
    const plugin = validatePlugin(pluginToDoc(request ?? pb.ResourcePlugin.fromPartial({})));
    const ref = parsePluginRef(plugin.name);
    if (ref.latest) throw new ValidationError([{ field: "name", description: "publish a concrete version (name or name@semver), not @latest", rule: "version" }]);
    const version = ref.version ?? "0.0.0";
    const spec = plugin.spec!;
    if (dryRun) {
      // The decision alone: it refuses what a publish would refuse, and appends nothing.
      const events = decidePlugin({ kind: "publish", name: ref.name, version, spec, digest: pluginDigest(spec) }, this.plugins.getOrEmpty(ref.name).state);
      return {
        plugin: pb.ResourcePluginVersion.fromPartial({ name: ref.name, version, spec, digest: pluginDigest(spec) }),
        unchanged: events.length === 0,
      };
    }
    const { appended } = await execute(this.deps.store, this.plugins, ref.name,
      (state) => decidePlugin({ kind: "publish", name: ref.name, version, spec, digest: pluginDigest(spec) }, state).map(encode),
      this.meta(call, `publish:${version}`));
    return { plugin: this.pluginVersion(ref.name, version), unchanged: !appended };
  }

  getPlugin(refText: string): pb.ResourcePluginVersion {
    const ref = parsePluginRef(refText);
    // A version being deleted is still shown when named (its sandboxes still run on it).
    const named = ref.version && !ref.latest && this.plugins.get(ref.name)?.state.versions.has(ref.version) ? ref.version : undefined;
    const version = named ?? this.resolveVersion(ref.name, ref.latest || ref.version === undefined ? undefined : ref.version);
    if (!version) throw new NotFoundError(`plugin ${refText} not found`);
    return this.pluginVersion(ref.name, version);
  }

  /**
   * Version summaries (no spec: a spec may be large, a listing must stay small), ordered by
   * name then version, a page at a time. The page token is the last `name@version` returned.
   */
  listPlugins(request: Partial<pb.ListResourcePluginsRequest> = {}): pb.ListResourcePluginsResponse {
    const size = Math.min(MAX_PAGE, request.pageSize || DEFAULT_PAGE);
    const all: Array<{ name: string; version: string }> = [];
    for (const [name, { state }] of this.plugins.entries()) {
      if (request.name && name !== request.name) continue;
      for (const version of [...state.versions.keys()].sort(semver.compare)) all.push({ name, version });
    }
    all.sort((a, b) => a.name.localeCompare(b.name) || semver.compare(a.version, b.version));
    const start = request.pageToken ? all.findIndex((v) => `${v.name}@${v.version}` === request.pageToken) + 1 : 0;
    if (request.pageToken && start === 0) {
      throw new ValidationError([{ field: "page_token", description: `page token "${request.pageToken}" is not a listed version (it may have been deleted): list again from the start`, rule: "page-token" }]);
    }
    const page = all.slice(start, start + size);
    const last = page.at(-1);
    return {
      plugins: page.map((v) => ({ ...this.pluginVersion(v.name, v.version), spec: undefined })),
      nextPageToken: start + size < all.length && last ? `${last.name}@${last.version}` : "",
    };
  }

  async deletePlugin(refText: string, call: CallContext = {}): Promise<string[]> {
    const ref = parsePluginRef(refText);
    const state = this.plugins.get(ref.name)?.state;
    const versions = ref.version && !ref.latest
      ? [ref.version]
      : ref.latest ? [this.resolveVersion(ref.name, undefined)].filter((v): v is string => !!v) : [...(state?.versions.keys() ?? [])];
    await execute(this.deps.store, this.plugins, ref.name,
      (s) => decidePlugin({ kind: "delete", name: ref.name, versions }, s).map(encode),
      this.meta(call, `delete:${versions.join(",")}`));
    // Versions no sandbox uses go now; the others once their last sandbox is gone.
    await this.removeUnusedVersions(ref.name);
    return versions.map((v) => `${ref.name}@${v}`);
  }

  private pluginVersion(name: string, version: string): pb.ResourcePluginVersion {
    const v = this.plugins.get(name)?.state.versions.get(version);
    if (!v) throw new NotFoundError(`plugin ${name}@${version} not found`);
    return { name, version, spec: v.spec, digest: v.digest, createdAt: v.createdAt, sandboxes: this.sandboxesUsing(name, version), deleting: v.deleting };
  }

  /** A published version not being deleted: what a new sandbox may use. */
  private resolveVersion(name: string, version: string | undefined): string | undefined {
    const versions = [...(this.plugins.get(name)?.state.versions.values() ?? [])].filter((v) => !v.deleting).map((v) => v.version);
    if (version !== undefined) return versions.includes(version) ? version : undefined;
    return versions.sort(semver.rcompare)[0];
  }

  private sandboxesUsing(plugin: string, version: string): string[] {
    const out: string[] = [];
    for (const [name, { state }] of this.sandboxes.entries()) {
      if (state.status !== "active" && state.status !== "deleting") continue;
      if (state.resources.some((r) => r.plugin === plugin && r.version === version)) out.push(name);
    }
    return out.sort();
  }

  // ---- sandboxes ----

  async applySandbox(request: pb.Sandbox | undefined, call: CallContext = {}, dryRun = false): Promise<pb.ApplySandboxResponse> {
    const sandbox = validateSandbox(sandboxToDoc(request ?? pb.Sandbox.fromPartial({})));
    const plugins = [...new Set(sandbox.spec!.resources.map((r) => parsePluginRef(r.plugin).name))];
    return this.pluginLocks.run(plugins, () => this.applyLocked(sandbox, call, dryRun));
  }

  private async applyLocked(sandbox: pb.Sandbox, call: CallContext, dryRun: boolean): Promise<pb.ApplySandboxResponse> {
    const spec = sandbox.spec!;
    const violations: FieldViolation[] = [];
    const resolved: pb.ResolvedResource[] = [];
    const existing = this.sandboxes.get(sandbox.name)?.state;
    const active = existing?.status === "active";
    // A resource the sandbox runs keeps its version: a bare name or `@latest` (which resolve
    // once, at creation) or a ref naming that very version is no change, even once a newer
    // version is published or this one is being deleted. A ref naming another version (or
    // plugin) resolves as for a new resource, and the decider refuses it as a change.
    const runs = (name: string) =>
      (active && existing.spec?.resources.some((x) => x.name === name) ? existing.resources.find((x) => x.name === name) : undefined);
    spec.resources.forEach((r, i) => {
      const ref = parsePluginRef(r.plugin);
      const kept = runs(r.name);
      if (kept && kept.plugin === ref.name && (ref.latest || ref.version === undefined || ref.version === kept.version)) {
        resolved.push({ name: r.name, plugin: kept.plugin, version: kept.version, params: r.params });
        return;
      }
      const version = this.resolveVersion(ref.name, ref.latest ? undefined : ref.version);
      if (!version) {
        const deleting = ref.version && !ref.latest && this.plugins.get(ref.name)?.state.versions.get(ref.version)?.deleting;
        violations.push({
          field: `spec.resources[${i}].plugin`,
          description: deleting
            ? `plugin ${r.plugin} is being deleted: no new sandbox may use it`
            : `plugin ${r.plugin} is not published${ref.version && !ref.latest ? "" : " (no version of it exists)"}`,
          rule: "unknown-plugin",
        });
        return;
      }
      resolved.push({ name: r.name, plugin: ref.name, version, params: r.params });
    });
    // Every problem at once: outputKeys are checked against the plugins that did resolve.
    const specOf = new Map(resolved.map((r) => [r.name, this.plugins.get(r.plugin)?.state.versions.get(r.version)?.spec]));
    violations.push(...checkSandboxAgainstPlugins(sandbox, (name) => specOf.get(name)));
    if (violations.length) throw new ValidationError(violations);

    // A dry run mints nothing: a new sandbox's URLs are only known once it is created.
    const routingKey = active ? existing.routingKey : dryRun ? "<routing-key>" : this.deps.routingKey();
    const endpoints = endpointUrls(spec.defaultRouteGroup?.endpoints ?? [], routingKey, this.deps.previewDomain);
    const canonical = (s: pb.SandboxSpec | undefined) => JSON.stringify(pb.SandboxSpec.toJSON(s ?? pb.SandboxSpec.fromPartial({})));
    const decide = (state: SandboxState) => decideSandbox({
      kind: "create", sandbox, resources: resolved, routingKey, endpoints,
      canonicalSpec: canonical(spec), existingSpec: state.status === "active" ? canonical(state.spec) : undefined,
    }, state);
    if (dryRun) return { created: false, unchanged: false, plan: planOf(decide(existing ?? initialSandbox()), resolved, active) };
    const { appended } = await execute(this.deps.store, this.sandboxes, sandbox.name, (state) => decide(state).map(encode), this.meta(call, "create"));
    return { sandbox: await this.view(sandbox.name, false), created: !!appended && !active, unchanged: !appended };
  }

  async deleteSandbox(name: string, force: boolean, call: CallContext = {}): Promise<pb.SandboxView> {
    await this.sandboxCommand(name, { kind: "delete", name, force }, call, `delete:${force}`);
    const state = this.sandboxes.get(name)?.state;
    if (!state || state.status === "none") throw new NotFoundError(`sandbox ${name} not found`);
    return this.buildView(state, undefined);
  }

  /** Every view the API answers with is built here, one sandbox at a time, and cannot throw (see safeView). */
  private buildView(state: SandboxRecord, values: Map<string, Buffer> | undefined): pb.SandboxView {
    const locals = this.locals.get(state.routingKey)?.state;
    return safeView(state, () => buildView(state, this.workflows, values, this.forks.get(state.routingKey)?.state, locals), (err) => {
      // Once per sandbox and problem: a client polling the list would repeat it every time.
      const problem = errorMessage(err);
      if (this.unrenderable.get(state.name) === problem) return;
      this.unrenderable.set(state.name, problem);
      this.deps.logger.warn({ err, sandbox: state.name }, "a stored sandbox cannot be shown in full; answering with what can be");
    });
  }

  /**
   * Where the sandbox's forks are on its cluster: the last generation applied (while an
   * update's generation is being applied, the one before still serves).
   */
  forkPlacements(state: SandboxRecord): pb.ForkPlacement[] {
    return this.forks.get(state.routingKey)?.state.applied?.forks ?? [];
  }

  /** Runs the failed resources' create workflows again; returns their names. */
  async retrySandbox(name: string, call: CallContext = {}): Promise<pb.RetrySandboxResponse> {
    const before = this.sandboxes.get(name)?.state;
    const failed = before?.status === "active" ? before.resources.filter((r) => r.status === "Failed" || r.status === "DeprovisionFailed").map((r) => r.name) : [];
    await this.sandboxCommand(name, { kind: "retry", name }, call, "retry");
    return { sandbox: await this.view(name, false), resources: failed };
  }

  private async sandboxCommand(name: string, command: SandboxCommand, call: CallContext, key: string): Promise<void> {
    await execute(this.deps.store, this.sandboxes, name, (state) => decideSandbox(command, state).map(encode), this.meta(call, key));
  }

  /** A job that changed, or the queued and running jobs of a group that went away, meet the server's own rules. */
  private reconcileJobs(c: Commit): void {
    const names = c.aggregate === Aggregates.job ? [c.aggregateId]
      : c.aggregate === Aggregates.jobrunnergroup
        ? [...this.jobs.records()].filter((j) => j.spec.runnerGroup === c.aggregateId && (j.phase === "Queued" || j.phase === "Running")).map((j) => j.name)
        : [];
    for (const name of names) void this.jobs.reconcile(name);
  }

  /** What a command's commit records: its source, command, correlation id and actor. */
  meta(call: CallContext, command: string) {
    return {
      source: "sandbox", command,
      correlationId: call.correlationId ?? this.newId(),
      ...(call.actor ? { actor: call.actor } : {}),
    };
  }

  async view(name: string, showOutputs: boolean): Promise<pb.SandboxView> {
    const state = this.sandboxes.get(name)?.state;
    if (!state || state.status === "none" || state.status === "deleted") throw new NotFoundError(`sandbox ${name} not found`);
    return this.buildView(state, showOutputs ? await this.outputValues(state) : undefined);
  }

  list(): pb.SandboxView[] {
    const out: pb.SandboxView[] = [];
    for (const [, { state }] of this.sandboxes.entries()) {
      if (state.status === "active" || state.status === "deleting") out.push(this.buildView(state, undefined));
    }
    return out.sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Calls `watcher` with the view after every change to the sandbox, and with undefined once it is gone. */
  watch(name: string, watcher: Watcher): () => void {
    let set = this.watchers.get(name);
    if (!set) this.watchers.set(name, (set = new Set()));
    set.add(watcher);
    return () => { set.delete(watcher); };
  }

  /** Output values live in the output journal, named with their digests by the step runs' result events; read on demand. */
  private async outputValues(state: SandboxRecord): Promise<Map<string, Buffer>> {
    const values = new Map<string, Buffer>();
    for (const r of state.resources) {
      const wf = this.workflows.get(workflowId(state.routingKey, r.name, "create"))?.state;
      for (const step of wf?.steps ?? []) {
        if (step.status !== "succeeded" || !step.runId) continue;
        for (const recorded of (await this.deps.store.read(Aggregates.steprun, step.runId)).events) {
          const e = decode(recorded);
          if (e?.type !== "ephemera.steprun.succeeded.v1") continue;
          for (const [name, value] of await journaledValues(this.deps.values, step.runId, e.data.outputs)) values.set(`${r.name}/${step.name}.${name}`, value);
        }
      }
    }
    return values;
  }

  /**
   * The runs whose logs a request reads, in plan order, create phase first (each step's
   * latest attempt, or attempt `filter.attempt`), and whether more may still start.
   */
  logRuns(sandbox: string, resource: string, filter: LogFilter): LogSelection {
    const state = this.sandboxes.get(sandbox)?.state;
    const record = state && state.status !== "none" ? state : undefined;
    const r = record?.resources.find((x) => x.name === resource);
    return selectRuns(sandbox, resource, filter, {
      sandbox: state,
      workflow: (phase) => (record ? this.workflows.get(workflowId(record.routingKey, resource, phase))?.state : undefined),
      pluginSteps: (phase) => {
        const spec = r && this.plugins.get(r.plugin)?.state.versions.get(r.version)?.spec;
        return spec?.[phase].map((s) => s.name);
      },
    });
  }

  /** Whether a run is over, as its workflow records it. */
  runEnded(runId: string): boolean {
    const run = parseRunId(runId);
    return !!run && runEnded(this.workflows.get(run.workflowId)?.state, runId);
  }

  /** A run's log as stored so far, entry by entry. */
  logEntries(runId: string, options: ReadOptions): Promise<LogEntry[]> {
    return this.deps.logs.entries(runId, options);
  }

  /** A run's log, then what is appended to it, until its end (see LogStore.follow). */
  followLog(runId: string, options: ReadOptions, onEntry: (entry: LogEntry) => void): LogFollower {
    return this.deps.logs.follow(runId, options, onEntry);
  }

  nowMs(): number {
    return this.now();
  }

  /** Every commit from the beginning, then live ones (the audit stream of EventService). */
  followEvents(handler: (commit: Commit) => void): Subscription {
    return this.deps.store.follow({}, handler);
  }

  // ---- reactions ----

  private sandboxOf(c: Commit): string | undefined {
    if (c.aggregate === Aggregates.sandbox) return c.aggregateId;
    if (c.aggregate === Aggregates.workflow || c.aggregate === Aggregates.steprun || c.aggregate === Aggregates.forks || c.aggregate === Aggregates.locals) {
      return this.byRoutingKey.get(c.aggregateId.split(".")[0]!);
    }
    return undefined;
  }

  /** Records the end of each resource's workflows on the sandbox, once. */
  private async reconcile(name: string, cause?: { correlationId: string; causationId: string }): Promise<void> {
    const state = this.sandboxes.get(name)?.state;
    if (!state || state.status === "none" || state.status === "deleted") return;
    for (const r of state.resources) {
      for (const phase of ["create", "delete"] as const) {
        const id = workflowId(state.routingKey, r.name, phase);
        const wf = this.workflows.get(id)?.state;
        if (!wf || !isTerminal(wf.status) || wf.status === "cancelled") continue;
        // After a retry, only the outcome of the retried workflow counts.
        if (phase === "create" && wf.retried < r.retries) continue;
        if (phase === "delete" && wf.retried < r.deprovisionRetries) continue;
        await execute(this.deps.store, this.sandboxes, name, (s) => decideSandbox({
          kind: "workflow-ended", resource: r.name, phase, workflowId: id,
          outcome: wf.status === "succeeded" ? "succeeded" : "failed",
          outputs: wf.steps.flatMap((st) => st.outputs.map((o) => ({ key: `${st.name}.${o.key}`, size: o.size }))),
          failure: wf.failure,
        }, s).map(encode), { source: "sandbox", command: `workflow-ended:${id}`, ...cause });
      }
    }
    // The runner's answer to the last request of forks, recorded once.
    const requested = this.sandboxes.get(name)?.state;
    if (!requested || requested.status === "none" || !requested.forks.requested) return;
    const outcome = this.forks.get(requested.routingKey)?.state.outcome;
    if (!outcome || outcome.generation !== requested.forks.requested) return;
    await execute(this.deps.store, this.sandboxes, name, (s) => decideSandbox({
      kind: "forks-reported", generation: outcome.generation, outcome: outcome.kind, ...(outcome.failure ? { failure: outcome.failure } : {}),
    }, s).map(encode), { source: "sandbox", command: `forks-reported:${outcome.generation}`, ...cause });
  }

  private readonly sandboxListeners = new Set<() => void>();

  /** Called after every change to a sandbox is folded in (the Routes API's watchers). */
  onSandboxChange(listener: () => void): () => void {
    this.sandboxListeners.add(listener);
    return () => this.sandboxListeners.delete(listener);
  }

  /**
   * Every sandbox as the projection holds it (deleted ones included; callers filter), with its
   * forks' placements, the local workloads a workstation serves now and their Services.
   */
  *placedSandboxes(): Iterable<PlacedSandbox> {
    for (const [, { state }] of this.sandboxes.entries()) {
      if (state.status === "none") continue;
      yield {
        sandbox: state, placements: this.forkPlacements(state),
        connected: connectedLocals(this.locals.get(state.routingKey)?.state),
        localPlacements: this.forks.get(state.routingKey)?.state.locals ?? [],
      };
    }
  }

  private notify(c: Commit): void {
    if (c.aggregate === Aggregates.sandbox) {
      const sb = this.sandboxes.get(c.aggregateId)?.state;
      if (sb && sb.status !== "none") this.byRoutingKey.set(sb.routingKey, c.aggregateId);
    }
    const name = this.sandboxOf(c);
    const set = name ? this.watchers.get(name) : undefined;
    if (!name || !set?.size) return;
    const state = this.sandboxes.get(name)?.state;
    const view = state && state.status !== "deleted" && state.status !== "none" ? this.buildView(state, undefined) : undefined;
    for (const w of set) w(view);
  }
}

export type { DomainEvent };

/** What the decided events of an apply would do, as a plan (nothing is written for it). */
function planOf(events: DomainEvent[], resources: pb.ResolvedResource[], exists: boolean): pb.SandboxPlan {
  const plan = pb.SandboxPlan.fromPartial({ action: exists ? "unchanged" : "create", resources });
  for (const e of events) {
    if (e.type === "ephemera.sandbox.created.v1") plan.action = "create";
    if (e.type === "ephemera.sandbox.updated.v1") {
      plan.action = "update";
      plan.changes = e.data.changes;
      plan.endpoints = e.data.endpoints;
    }
    if (e.type === "ephemera.sandbox.resource_provision_requested.v1") plan.create.push(e.data.resource!.name);
    if (e.type === "ephemera.sandbox.resource_deprovision_requested.v1") plan.delete.push(e.data.resource!.name);
  }
  return plan;
}
