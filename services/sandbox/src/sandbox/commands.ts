// The sandbox commands behind the API: apply (create, update or a dry run's plan), delete and
// retry, over the sandbox projection, with plugin versions resolved from the plugin projection.
import * as pb from "@ephemera/proto";
import { encode, type DomainEvent } from "@ephemera/events";
import { execute, type EventStore } from "@ephemera/eventstore";
import { NotFoundError, ValidationError, type FieldViolation, type Logger } from "@ephemera/kit";
import { checkSandboxAgainstPlugins, parsePluginRef, sandboxToDoc, validateSandbox } from "@ephemera/spec";
import type { CallContext, MetaOf } from "../core/call.js";
import type { SandboxProjections } from "../core/projections.js";
import { checkVersionsKept, resolveVersion, type ChosenVersion } from "../plugin/versions.js";
import { canonicalSpec, decideSandbox, type SandboxCommand } from "./decide.js";
import type { Admission } from "./admission.js";
import { endpointUrls } from "./endpoints.js";
import { initialSandbox, type SandboxState } from "./state.js";
import type { SandboxViews } from "./views.js";

export interface SandboxCommandDeps {
  store: EventStore;
  projections: SandboxProjections;
  views: SandboxViews;
  logger: Logger;
  meta: MetaOf;
  /** Resolves once this replica holds what the store held when asked. */
  readYourWrites: () => Promise<number>;
  /** Mints a routing key. */
  routingKey: () => string;
  /** Base domain of endpoint URLs. */
  previewDomain: string;
  /** Holds creates under a burst (admission.ts); absent: none is held. */
  admission?: Admission;
}

/** What a valid apply decided on: the sandbox, its resources' versions, and the sandbox it replaces. */
interface Chosen {
  sandbox: ReturnType<typeof validateSandbox>;
  resolved: pb.ResolvedResource[];
  chosen: ChosenVersion[];
  existing: SandboxState | undefined;
}

export class SandboxCommands {
  constructor(private readonly deps: SandboxCommandDeps) {}

  async apply(request: pb.Sandbox | undefined, call: CallContext = {}, dryRun = false, admitted = false): Promise<pb.ApplySandboxResponse> {
    const sandbox = validateSandbox(sandboxToDoc(request ?? pb.Sandbox.fromPartial({})));
    await this.deps.readYourWrites();
    const { plugins, sandboxes } = this.deps.projections;
    const spec = sandbox.spec!;
    const violations: FieldViolation[] = [];
    const resolved: pb.ResolvedResource[] = [];
    const chosen: ChosenVersion[] = [];
    const existing = sandboxes.get(sandbox.name)?.state;
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
      const version = resolveVersion(plugins, ref.name, ref.latest ? undefined : ref.version);
      if (!version) {
        const deleting = ref.version && !ref.latest && plugins.get(ref.name)?.state.versions.get(ref.version)?.deleting;
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
      chosen.push({ index: i, plugin: ref.name, version, revision: plugins.get(ref.name)?.revision ?? 0 });
    });
    // Every problem at once: outputKeys are checked against the plugins that did resolve.
    const specOf = new Map(resolved.map((r) => [r.name, plugins.get(r.plugin)?.state.versions.get(r.version)?.spec]));
    violations.push(...checkSandboxAgainstPlugins(sandbox, (name) => specOf.get(name)));
    if (violations.length) throw new ValidationError(violations);
    const chose: Chosen = { sandbox, resolved, chosen, existing };
    // A new sandbox that runs resources waits its turn once it is known to be valid. One that
    // waited is decided again on what holds by then (a plugin version may have gone meanwhile).
    if (!dryRun && !active && !admitted && resolved.length > 0 && this.deps.admission?.enabled) {
      const ticket = await this.deps.admission.admit(spec.cluster, call.signal, call.deadline);
      try {
        return ticket.waited ? await this.apply(request, call, dryRun, true) : await this.write(chose, call, dryRun);
      } finally {
        // Counted from the projections from here (the create's own commit is folded in by now).
        this.deps.admission.observe(sandbox.name);
        ticket.done();
      }
    }
    return this.write(chose, call, dryRun);
  }

  /** A valid apply's decision, appended (or, for a dry run, its plan). */
  private async write({ sandbox, resolved, chosen, existing }: Chosen, call: CallContext, dryRun: boolean): Promise<pb.ApplySandboxResponse> {
    const { plugins, sandboxes } = this.deps.projections;
    const spec = sandbox.spec!;
    const active = existing?.status === "active";
    // A dry run mints nothing: a new sandbox's URLs are only known once it is created.
    const routingKey = active ? existing.routingKey : dryRun ? "<routing-key>" : this.deps.routingKey();
    const endpoints = endpointUrls(spec.defaultRouteGroup?.endpoints ?? [], routingKey, this.deps.previewDomain);
    const decide = (state: SandboxState) => decideSandbox({
      kind: "create", sandbox, resources: resolved, routingKey, endpoints,
      canonicalSpec: canonicalSpec(spec), existingSpec: state.status === "active" ? canonicalSpec(state.spec) : undefined,
    }, state);
    if (dryRun) return { created: false, unchanged: false, plan: planOf(decide(existing ?? initialSandbox()), resolved, active) };
    const { appended } = await execute(this.deps.store, sandboxes, sandbox.name, (state) => decide(state).map(encode),
      this.deps.meta(call, "create"));
    if (appended) {
      await checkVersionsKept({
        store: this.deps.store, plugins, sandboxes, logger: this.deps.logger, previewDomain: this.deps.previewDomain,
        meta: (command) => this.deps.meta(call, command),
      }, sandbox, chosen, existing);
    }
    return { sandbox: await this.deps.views.view(sandbox.name, false), created: !!appended && !active, unchanged: !appended };
  }

  async delete(name: string, force: boolean, call: CallContext = {}): Promise<pb.SandboxView> {
    await this.deps.readYourWrites();
    // The state the command left (a sandbox deleted at once has already left memory).
    const state = await this.run(name, { kind: "delete", name, force }, call, `delete:${force}`);
    if (state.status === "none") throw new NotFoundError(`sandbox ${name} not found`);
    return this.deps.views.build(state, undefined);
  }

  /** Runs the failed resources' create workflows again; returns their names. */
  async retry(name: string, call: CallContext = {}): Promise<pb.RetrySandboxResponse> {
    await this.deps.readYourWrites();
    const before = this.deps.projections.sandboxes.get(name)?.state;
    const failed = before?.status === "active"
      ? before.resources.filter((r) => r.status === "Failed" || r.status === "DeprovisionFailed").map((r) => r.name)
      : [];
    await this.run(name, { kind: "retry", name }, call, "retry");
    return { sandbox: await this.deps.views.view(name, false), resources: failed };
  }

  private async run(name: string, command: SandboxCommand, call: CallContext, key: string): Promise<SandboxState> {
    const { entity } = await execute(this.deps.store, this.deps.projections.sandboxes, name,
      (state) => decideSandbox(command, state).map(encode), this.deps.meta(call, key));
    return entity.state;
  }
}

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
