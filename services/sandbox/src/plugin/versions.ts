// The rule between plugin versions and the sandboxes using them: a version being deleted
// goes once no sandbox uses it, and no sandbox lands on a version removed meanwhile, by any
// replica (docs/architecture.md, Decisions: plugin versions and the sandboxes using them).
import type * as pb from "@ephemera/proto";
import { encode } from "@ephemera/events";
import { execute, type CommandMeta, type EventStore, type Feed, type Projection } from "@ephemera/eventstore";
import { ConcurrencyError, ValidationError, delay, type FieldViolation, type Logger } from "@ephemera/kit";
import semver from "semver";
import { canonicalSpec, decideSandbox } from "../sandbox/decide.js";
import { endpointUrls } from "../sandbox/endpoints.js";
import type { SandboxState } from "../sandbox/state.js";
import { decidePlugin } from "./decide.js";
import type { PluginState } from "./state.js";

/** Attempts at removing unused plugin versions at one stream position before the failure is left to redelivery. */
const REMOVE_ATTEMPTS = 20;

/** A version an apply resolved (not kept from what the sandbox runs), by resource index, with the plugin's revision then. */
export interface ChosenVersion {
  index: number;
  plugin: string;
  version: string;
  revision: number;
}

/** A published version not being deleted: what a new sandbox may use (the newest, given no version). */
export function resolveVersion(plugins: Projection<PluginState>, name: string, version: string | undefined): string | undefined {
  const versions = [...(plugins.get(name)?.state.versions.values() ?? [])].filter((v) => !v.deleting).map((v) => v.version);
  if (version !== undefined) return versions.includes(version) ? version : undefined;
  return versions.sort(semver.rcompare)[0];
}

/** The live sandboxes running a plugin version, by name. */
export function sandboxesUsing(sandboxes: Projection<SandboxState>, plugin: string, version: string): string[] {
  const out: string[] = [];
  for (const [name, { state }] of sandboxes.entries()) {
    if (state.status !== "active" && state.status !== "deleting") continue;
    if (state.resources.some((r) => r.plugin === plugin && r.version === version)) out.push(name);
  }
  return out.sort();
}

export interface RemovalDeps {
  store: EventStore;
  plugins: Projection<PluginState>;
  sandboxes: Projection<SandboxState>;
  feed: Feed;
  /** Resolves once this replica holds what the store held when asked. */
  readYourWrites: () => Promise<number>;
}

/**
 * Removes the versions of a plugin that are being deleted and that no sandbox uses any more.
 * "No sandbox uses it" is decided on the projections caught up to a stream position, and
 * the removal is appended expecting the store still there: a sandbox appended meanwhile
 * (by any replica) makes it conflict, and it is decided again.
 */
export async function removeUnusedVersions(deps: RemovalDeps, plugin: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const deleting = [...(deps.plugins.get(plugin)?.state.versions.values() ?? [])].some((v) => v.deleting);
    if (!deleting) return;
    await deps.readYourWrites();
    // Taken in the same turn as the decision below (execute decides before it awaits).
    const at = deps.feed.position;
    try {
      await execute(deps.store, deps.plugins, plugin, (s) => {
        const inUse = [...s.versions.keys()].filter((v) => sandboxesUsing(deps.sandboxes, plugin, v).length > 0);
        return decidePlugin({ kind: "remove-unused", inUse }, s).map(encode);
      }, { source: "sandbox", command: "remove-unused", expectedPosition: at }, 1);
      return;
    } catch (err) {
      if (!(err instanceof ConcurrencyError) || attempt >= REMOVE_ATTEMPTS) throw err;
      await delay(Math.random() * Math.min(500, 10 * 2 ** attempt));
    }
  }
}

export interface KeptDeps {
  store: EventStore;
  plugins: Projection<PluginState>;
  sandboxes: Projection<SandboxState>;
  logger: Logger;
  previewDomain: string;
  /** The meta of the undoing command. */
  meta: (command: string) => CommandMeta;
}

/**
 * After a sandbox landed on the versions it resolved: were any of them removed meanwhile?
 * A removal decides "unused" at a stream position and is refused if anything was appended
 * after it, so one that landed did so before this sandbox; the plugin, read from the
 * store now, shows it. Then the apply is undone (a new sandbox deleted, an update put
 * back to the spec before it) and refused as if the version had been gone when it was
 * resolved. A plugin unchanged since the resolve costs one read and nothing else.
 */
export async function checkVersionsKept(
  deps: KeptDeps, sandbox: pb.Sandbox, chosen: ChosenVersion[], before: SandboxState | undefined,
): Promise<void> {
  const violations: FieldViolation[] = [];
  for (const plugin of new Set(chosen.map((c) => c.plugin))) {
    const mine = chosen.filter((c) => c.plugin === plugin);
    const entity = await deps.plugins.reload(deps.store, plugin);
    if (mine.every((c) => c.revision === entity.revision)) continue;
    for (const c of mine) {
      if (entity.state.versions.has(c.version)) continue;
      violations.push({
        field: `spec.resources[${c.index}].plugin`,
        description: `plugin ${plugin}@${c.version} was removed while this sandbox was applied: no sandbox may use it (the apply is undone)`,
        rule: "unknown-plugin",
      });
    }
  }
  if (!violations.length) return;
  deps.logger.warn({ sandbox: sandbox.name, violations }, "a plugin version was removed while a sandbox was applied onto it; undoing the apply");
  if (before?.status === "active" && before.spec) {
    const spec = before.spec;
    const kept = new Set(spec.resources.map((r) => r.name));
    const resources = before.resources.filter((r) => kept.has(r.name))
      .map((r) => ({ name: r.name, plugin: r.plugin, version: r.version, params: r.params }));
    // Nothing to undo once the sandbox is being deleted.
    await execute(deps.store, deps.sandboxes, sandbox.name, (state) => state.status !== "active" ? [] : decideSandbox({
      kind: "create", sandbox: { ...sandbox, spec }, resources, routingKey: before.routingKey,
      endpoints: endpointUrls(spec.defaultRouteGroup?.endpoints ?? [], before.routingKey, deps.previewDomain),
      canonicalSpec: canonicalSpec(spec), existingSpec: canonicalSpec(state.spec),
    }, state).map(encode), deps.meta("undo-apply"));
  } else {
    await execute(deps.store, deps.sandboxes, sandbox.name,
      (state) => state.status !== "active" ? [] : decideSandbox({ kind: "delete", name: sandbox.name, force: false }, state).map(encode),
      deps.meta("undo-create"));
  }
  throw new ValidationError(violations);
}
