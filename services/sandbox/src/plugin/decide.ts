// The plugin decider: versions are published once and never change; a version that a
// sandbox uses cannot be deleted.
import type * as pb from "@ephemera/proto";
import { ev, type DomainEvent, type PluginState } from "@ephemera/events";
import { ConflictError, NotFoundError } from "@ephemera/kit";

export type PluginCommand =
  | { kind: "publish"; name: string; version: string; spec: pb.ResourcePluginSpec; digest: string }
  | { kind: "delete"; name: string; versions: string[]; usedBy: (version: string) => string[] };

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
      const inUse = command.versions.flatMap((v) => command.usedBy(v).map((s) => `${s} (${command.name}@${v})`));
      if (inUse.length) {
        throw new ConflictError(`plugin ${command.name} is in use by sandbox${inUse.length > 1 ? "es" : ""} ${inUse.join(", ")}`);
      }
      return command.versions.map((version) => ev("ephemera.plugin.version_deleted.v1", { name: command.name, version }));
    }
  }
}
