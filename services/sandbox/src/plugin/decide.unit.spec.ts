import * as pb from "@ephemera/proto";
import { ev, evolvePlugin, initialPlugin, type DomainEvent } from "@ephemera/events";
import { ConflictError, NotFoundError } from "@ephemera/kit";
import { decidePlugin, type PluginCommand } from "./decide.js";

const given = (events: DomainEvent[]) => events.reduce((s, e) => evolvePlugin(s, e, "2026-01-01T00:00:00Z"), initialPlugin());
const spec = pb.ResourcePluginSpec.fromPartial({ runner: { image: "bash" }, create: [{ name: "a", script: "#!/bin/sh\n" }] });
const publish = (version: string, digest: string): PluginCommand => ({ kind: "publish", name: "db", version, spec, digest });
const published = (version: string, digest: string) => ev("ephemera.plugin.published.v1", { name: "db", version, spec, digest });
const del = (versions: string[], usedBy: Record<string, string[]> = {}): PluginCommand =>
  ({ kind: "delete", name: "db", versions, usedBy: (v) => usedBy[v] ?? [] });

describe("plugin decider", () => {
  it("publishes a new version", () => {
    const out = decidePlugin(publish("1.0.0", "d1"), given([]));
    expect(out).toEqual([published("1.0.0", "d1")]);
  });

  it("re-publishing an identical version is a no-op", () => {
    expect(decidePlugin(publish("1.0.0", "d1"), given([published("1.0.0", "d1")]))).toEqual([]);
  });

  it("re-publishing a version with a different spec is a conflict", () => {
    expect(() => decidePlugin(publish("1.0.0", "d2"), given([published("1.0.0", "d1")]))).toThrow(ConflictError);
    expect(() => decidePlugin(publish("1.0.0", "d2"), given([published("1.0.0", "d1")]))).toThrow(/immutable/);
  });

  it("a version in use cannot be deleted and the error names the sandboxes", () => {
    const state = given([published("1.0.0", "d1"), published("1.1.0", "d2")]);
    expect(() => decidePlugin(del(["1.0.0", "1.1.0"], { "1.1.0": ["sb-a", "sb-b"] }), state))
      .toThrow("plugin db is in use by sandboxes sb-a (db@1.1.0), sb-b (db@1.1.0)");
  });

  it("deletes unused versions, and a missing version is not found", () => {
    const state = given([published("1.0.0", "d1")]);
    expect(decidePlugin(del(["1.0.0"]), state)).toEqual([ev("ephemera.plugin.version_deleted.v1", { name: "db", version: "1.0.0" })]);
    expect(() => decidePlugin(del(["2.0.0"]), state)).toThrow(NotFoundError);
    expect(() => decidePlugin(del([]), given([]))).toThrow(NotFoundError);
  });
});
