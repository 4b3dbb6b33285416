// The plugin aggregate's state (one per plugin name, every version in it) and its evolve,
// beside its decider: the sandbox service owns plugins.
import type * as pb from "@ephemera/proto";
import type { DomainEvent } from "@ephemera/events";

export interface PluginVersionState {
  version: string;
  spec: pb.ResourcePluginSpec;
  digest: string;
  createdAt: string;
  /** Asked to be deleted: no new sandbox may use it; it goes once no sandbox does. */
  deleting: boolean;
}

export interface PluginState {
  name: string;
  /** Published and not deleted, by version. */
  versions: Map<string, PluginVersionState>;
}

export const initialPlugin = (): PluginState => ({ name: "", versions: new Map() });

export function evolvePlugin(state: PluginState, event: DomainEvent, time: string): PluginState {
  switch (event.type) {
    case "ephemera.plugin.published.v1": {
      const versions = new Map(state.versions);
      versions.set(event.data.version, { version: event.data.version, spec: event.data.spec!, digest: event.data.digest, createdAt: time, deleting: false });
      return { name: event.data.name, versions };
    }
    case "ephemera.plugin.version_delete_requested.v1": {
      const v = state.versions.get(event.data.version);
      if (!v) return state;
      return { ...state, versions: new Map(state.versions).set(v.version, { ...v, deleting: true }) };
    }
    case "ephemera.plugin.version_deleted.v1": {
      const versions = new Map(state.versions);
      versions.delete(event.data.version);
      return { ...state, versions };
    }
    default:
      return state;
  }
}
