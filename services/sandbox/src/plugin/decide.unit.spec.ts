// The plugin decider as given-events / when-command / then-events (or then-error): versions
// are immutable, and deleting one is a process (deleting, then removed once unused).
import * as pb from "@ephemera/proto";
import { ev, type DomainEvent } from "@ephemera/events";
import type { PluginState } from "./state.js";
import { ConflictError, NotFoundError } from "@ephemera/kit";
import { pluginDecider, type PluginCommand } from "./decide.js";
import { deciderSpec } from "../../../../test/support/decider.js";

const T0 = "2026-01-01T00:00:00.000Z";

const { at, given: givenTimed } = deciderSpec(pluginDecider, T0);
/** The plugin decider never looks at time: every given event is appended at T0. */
const given = (...events: DomainEvent[]) => givenTimed(at(T0, ...events));

const spec = pb.ResourcePluginSpec.fromPartial({ runner: { image: "bash" }, create: [{ name: "a", script: "#!/bin/sh\n" }] });
const publish = (version: string, digest: string): PluginCommand => ({ kind: "publish", name: "db", version, spec, digest });
const published = (version: string, digest: string) => ev("ephemera.plugin.published.v1", { name: "db", version, spec, digest });
const del = (...versions: string[]): PluginCommand => ({ kind: "delete", name: "db", versions });
const removeUnused = (...inUse: string[]): PluginCommand => ({ kind: "remove-unused", inUse });
const deleteRequested = (version: string) => ev("ephemera.plugin.version_delete_requested.v1", { name: "db", version });
const versionDeleted = (version: string) => ev("ephemera.plugin.version_deleted.v1", { name: "db", version });

const versions = (s: PluginState) => [...s.versions.values()].map((v) => [v.version, v.deleting]);

describe("plugin: publish", () => {
  it("publishes a new version", () => {
    given().when(publish("1.0.0", "d1")).then(published("1.0.0", "d1"));
    given(published("1.0.0", "d1")).when(publish("1.1.0", "d2")).then(published("1.1.0", "d2"));
  });

  it("re-publishing an identical version is a no-op, even while it is being deleted", () => {
    given(published("1.0.0", "d1")).when(publish("1.0.0", "d1")).thenNothing();
    given(published("1.0.0", "d1"), deleteRequested("1.0.0")).when(publish("1.0.0", "d1")).thenNothing();
  });

  it("a published version is immutable: a different spec under its number is a conflict", () => {
    given(published("1.0.0", "d1")).when(publish("1.0.0", "d2")).thenThrows(ConflictError, /immutable/);
    given(published("1.0.0", "d1"), deleteRequested("1.0.0")).when(publish("1.0.0", "d2")).thenThrows(ConflictError, /db@1\.0\.0/);
  });
});

describe("plugin: delete", () => {
  const two = [published("1.0.0", "d1"), published("1.1.0", "d2")];

  it("marks the versions deleting, without removing them", () => {
    const w = given(...two).when(del("1.0.0", "1.1.0"));
    w.then(deleteRequested("1.0.0"), deleteRequested("1.1.0"));
    expect(versions(w.state())).toEqual([["1.0.0", true], ["1.1.0", true]]);
  });

  it("is idempotent: a version already deleting is not asked again", () => {
    given(...two, deleteRequested("1.0.0")).when(del("1.0.0")).thenNothing();
    given(...two, deleteRequested("1.0.0")).when(del("1.0.0", "1.1.0")).then(deleteRequested("1.1.0"));
  });

  it("a missing version is not found, and nothing is marked", () => {
    given(...two).when(del("2.0.0")).thenThrows(NotFoundError, /db@2\.0\.0 not found/);
    given(...two).when(del("1.0.0", "2.0.0")).thenThrows(NotFoundError, /2\.0\.0/);
    given(...two, deleteRequested("1.0.0"), versionDeleted("1.0.0")).when(del("1.0.0")).thenThrows(NotFoundError, /not found/);
  });

  it("a delete naming no version is not found", () => {
    given().when(del()).thenThrows(NotFoundError, /plugin db not found/);
  });
});

describe("plugin: remove unused", () => {
  const three = [published("1.0.0", "d1"), published("1.1.0", "d2"), published("2.0.0", "d3")];

  it("removes only the versions being deleted that no sandbox uses", () => {
    const w = given(...three, deleteRequested("1.0.0"), deleteRequested("1.1.0")).when(removeUnused("1.1.0", "2.0.0"));
    w.then(versionDeleted("1.0.0"));
    expect(versions(w.state())).toEqual([["1.1.0", true], ["2.0.0", false]]);
  });

  it("removes a deleting version once its last sandbox is gone", () => {
    const h = [...three, deleteRequested("1.1.0")];
    given(...h).when(removeUnused("1.1.0")).thenNothing();
    given(...h).when(removeUnused()).then(versionDeleted("1.1.0"));
  });

  it("never removes a version nobody asked to delete, used or not", () => {
    given(...three).when(removeUnused()).thenNothing();
    given().when(removeUnused()).thenNothing();
  });

  it("a removed version is gone: removing again does nothing", () => {
    given(...three, deleteRequested("1.0.0"), versionDeleted("1.0.0")).when(removeUnused()).thenNothing();
  });
});
