// The plugin decider: versions are published once and never change. Deleting a version is
// a process: it is marked deleting (no new sandbox may use it), and removed once no sandbox
// uses it — so no interleaving of creates and deletes leaves a sandbox on a deleted version.
import type * as pb from "@ephemera/proto";
import { ev, type DomainEvent } from "@ephemera/events";
import { evolvePlugin, initialPlugin, type PluginState } from "./state.js";
import { ConflictError, NotFoundError } from "@ephemera/kit";

export type PluginCommand =
  | { kind: "publish"; name: string; version: string; spec: pb.ResourcePluginSpec; digest: string }
  | { kind: "delete"; name: string; versions: string[] }
  /** Removes the versions being deleted that no sandbox uses (`inUse`: the versions some sandbox still uses). */
  | { kind: "remove-unused"; inUse: string[] };

/** The plugin aggregate as one value: its initial state, evolve and decide. */
export const pluginDecider = {
  initialState: initialPlugin,
  evolve: evolvePlugin,
  decide: (command: PluginCommand, state: PluginState, _now: string) => decidePlugin(command, state),
};

export function decidePlugin(command: PluginCommand, state: PluginState): DomainEvent[] {
  switch (command.kind) {
    case "publish": {
      const existing = state.versions.get(command.version);
      if (existing?.digest === command.digest) return [];
      if (existing) {
        throw new ConflictError(
          `plugin ${command.name}@${command.version} is already published with a different spec; ` +
          `published versions are immutable: publish a new version`,
        );
      }
      return [ev("ephemera.plugin.published.v1", { name: command.name, version: command.version, spec: command.spec, digest: command.digest })];
    }
    case "delete": {
      if (command.versions.length === 0) throw new NotFoundError(`plugin ${command.name} not found`);
      for (const v of command.versions) {
        if (!state.versions.has(v)) throw new NotFoundError(`plugin ${command.name}@${v} not found`);
      }
      return command.versions
        .filter((v) => !state.versions.get(v)!.deleting)
        .map((version) => ev("ephemera.plugin.version_delete_requested.v1", { name: command.name, version }));
    }
    case "remove-unused": {
      const used = new Set(command.inUse);
      return [...state.versions.values()]
        .filter((v) => v.deleting && !used.has(v.version))
        .map((v) => ev("ephemera.plugin.version_deleted.v1", { name: state.name, version: v.version }));
    }
  }
}
