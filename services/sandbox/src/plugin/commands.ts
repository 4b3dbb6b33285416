// The plugin commands behind the API: publish (apply), get, list and delete, over the plugin
// projection, with the sandboxes using each version read from the sandbox projection.
import * as pb from "@ephemera/proto";
import { encode } from "@ephemera/events";
import { execute, type EventStore, type Projection } from "@ephemera/eventstore";
import { NotFoundError, ValidationError } from "@ephemera/kit";
import { parsePluginRef, pluginDigest, pluginToDoc, validatePlugin } from "@ephemera/spec";
import semver from "semver";
import type { CallContext, MetaOf } from "../core/call.js";
import type { SandboxState } from "../sandbox/state.js";
import { decidePlugin } from "./decide.js";
import type { PluginState } from "./state.js";
import { resolveVersion, sandboxesUsing } from "./versions.js";

const DEFAULT_PAGE = 100;
const MAX_PAGE = 500;

export interface PluginDeps {
  store: EventStore;
  plugins: Projection<PluginState>;
  sandboxes: Projection<SandboxState>;
  meta: MetaOf;
  /** Resolves once this replica holds what the store held when asked. */
  readYourWrites: () => Promise<number>;
  /** Removes the plugin's versions being deleted that no sandbox uses. */
  removeUnusedVersions: (plugin: string) => Promise<void>;
}

export class PluginCommands {
  constructor(private readonly deps: PluginDeps) {}

  async apply(
    request: pb.ResourcePlugin | undefined, call: CallContext = {}, dryRun = false,
  ): Promise<{ plugin: pb.ResourcePluginVersion; unchanged: boolean }> {
    const plugin = validatePlugin(pluginToDoc(request ?? pb.ResourcePlugin.fromPartial({})));
    const ref = parsePluginRef(plugin.name);
    if (ref.latest) {
      throw new ValidationError([{ field: "name", description: "publish a concrete version (name or name@semver), not @latest", rule: "version" }]);
    }
    const version = ref.version ?? "0.0.0";
    const spec = plugin.spec!;
    const publish = { kind: "publish", name: ref.name, version, spec, digest: pluginDigest(spec) } as const;
    await this.deps.readYourWrites();
    if (dryRun) {
      // The decision alone: it refuses what a publish would refuse, and appends nothing.
      const events = decidePlugin(publish, this.deps.plugins.getOrEmpty(ref.name).state);
      return {
        plugin: pb.ResourcePluginVersion.fromPartial({ name: ref.name, version, spec, digest: pluginDigest(spec) }),
        unchanged: events.length === 0,
      };
    }
    const { appended } = await execute(this.deps.store, this.deps.plugins, ref.name,
      (state) => decidePlugin(publish, state).map(encode), this.deps.meta(call, `publish:${version}`));
    return { plugin: this.version(ref.name, version), unchanged: !appended };
  }

  get(refText: string): pb.ResourcePluginVersion {
    const ref = parsePluginRef(refText);
    // A version being deleted is still shown when named (its sandboxes still run on it).
    const named = ref.version && !ref.latest && this.deps.plugins.get(ref.name)?.state.versions.has(ref.version) ? ref.version : undefined;
    const version = named
      ?? resolveVersion(this.deps.plugins, ref.name, ref.latest || ref.version === undefined ? undefined : ref.version);
    if (!version) throw new NotFoundError(`plugin ${refText} not found`);
    return this.version(ref.name, version);
  }

  /**
   * Version summaries (no spec: a spec may be large, a listing must stay small), ordered by
   * name then version, a page at a time. The page token is the last `name@version` returned.
   */
  list(request: Partial<pb.ListResourcePluginsRequest> = {}): pb.ListResourcePluginsResponse {
    const size = Math.min(MAX_PAGE, request.pageSize || DEFAULT_PAGE);
    const all: Array<{ name: string; version: string }> = [];
    for (const [name, { state }] of this.deps.plugins.entries()) {
      if (request.name && name !== request.name) continue;
      for (const version of [...state.versions.keys()].sort(semver.compare)) all.push({ name, version });
    }
    all.sort((a, b) => a.name.localeCompare(b.name) || semver.compare(a.version, b.version));
    const start = request.pageToken ? all.findIndex((v) => `${v.name}@${v.version}` === request.pageToken) + 1 : 0;
    if (request.pageToken && start === 0) {
      throw new ValidationError([{
        field: "page_token",
        description: `page token "${request.pageToken}" is not a listed version (it may have been deleted): list again from the start`,
        rule: "page-token",
      }]);
    }
    const page = all.slice(start, start + size);
    const last = page.at(-1);
    return {
      plugins: page.map((v) => ({ ...this.version(v.name, v.version), spec: undefined })),
      nextPageToken: start + size < all.length && last ? `${last.name}@${last.version}` : "",
    };
  }

  async delete(refText: string, call: CallContext = {}): Promise<string[]> {
    const ref = parsePluginRef(refText);
    await this.deps.readYourWrites();
    const state = this.deps.plugins.get(ref.name)?.state;
    const versions = ref.version && !ref.latest
      ? [ref.version]
      : ref.latest
        ? [resolveVersion(this.deps.plugins, ref.name, undefined)].filter((v): v is string => !!v)
        : [...(state?.versions.keys() ?? [])];
    await execute(this.deps.store, this.deps.plugins, ref.name,
      (s) => decidePlugin({ kind: "delete", name: ref.name, versions }, s).map(encode),
      this.deps.meta(call, `delete:${versions.join(",")}`));
    // Versions no sandbox uses go now; the others once their last sandbox is gone.
    await this.deps.removeUnusedVersions(ref.name);
    return versions.map((v) => `${ref.name}@${v}`);
  }

  private version(name: string, version: string): pb.ResourcePluginVersion {
    const v = this.deps.plugins.get(name)?.state.versions.get(version);
    if (!v) throw new NotFoundError(`plugin ${name}@${version} not found`);
    return {
      name, version, spec: v.spec, digest: v.digest, createdAt: v.createdAt,
      sandboxes: sandboxesUsing(this.deps.sandboxes, name, version), deleting: v.deleting,
    };
  }
}
