// How the console draws a resource's workflow: the plugin's steps with the sandbox's statuses,
// and one edge per pair of steps whatever names it.
import { mergeEdges, workflow } from "../../services/console/web/src/workflow.js";
import type { Graph, ResourceView } from "../../services/console/web/src/types.js";

const spec: Graph = {
  nodes: [{ name: "create-db" }, { name: "create-user" }, { name: "seed" }],
  edges: [
    { from: "create-db", to: "create-user", label: "url" },
    { from: "create-db", to: "seed", label: "url" },
    { from: "create-user", to: "seed", label: "password" },
  ],
};

describe("a resource's workflow graph", () => {
  it("shows every step of the spec, Pending until the sandbox has a view of it, and links each to its step page", () => {
    const resource: ResourceView = {
      name: "db", steps: [{ name: "create-db", phase: "create", status: "Succeeded", attempts: [{ attempt: 1 }] }],
    };
    const { steps } = workflow("feature x", resource, "create", spec);
    expect(steps.map((s) => [s.name, s.status])).toEqual([["create-db", "Succeeded"], ["create-user", "Pending"], ["seed", "Pending"]]);
    expect(steps[0]?.href).toBe("/sandboxes/feature%20x/resources/db/create/create-db");
    expect(steps[0]?.attempts).toEqual([{ attempt: 1 }]);
  });

  it("keeps the phases apart, a step view without a phase being a create step", () => {
    const resource: ResourceView = {
      name: "db",
      steps: [{ name: "create-db", status: "Succeeded" }, { name: "drop-db", phase: "delete", status: "Running" }],
    };
    expect(workflow("s", resource, "create", undefined).steps.map((s) => s.name)).toEqual(["create-db"]);
    expect(workflow("s", resource, "delete", undefined).steps.map((s) => [s.name, s.status])).toEqual([["drop-db", "Running"]]);
  });

  it("draws a step the spec does not list (a view of an older spec) and its edges from dependsOn", () => {
    const resource: ResourceView = { name: "db", steps: [{ name: "extra", phase: "create", status: "Failed", dependsOn: ["seed"] }] };
    const { steps, edges } = workflow("s", resource, "create", spec);
    expect(steps.map((s) => s.name)).toEqual(["create-db", "create-user", "seed", "extra"]);
    expect(edges).toContainEqual({ from: "seed", to: "extra" });
  });

  it("merges the edges of a pair into one labelled with each output, and drops edges to unknown steps and loops", () => {
    const steps = [{ name: "a" }, { name: "b" }];
    expect(mergeEdges([
      { from: "a", to: "b" }, { from: "a", to: "b", label: "url" }, { from: "a", to: "b", label: "port" }, { from: "a", to: "b", label: "url" },
      { from: "a", to: "gone" }, { from: "b", to: "b" },
    ], steps)).toEqual([{ id: "a->b", source: "a", target: "b", label: "url, port" }]);
    expect(mergeEdges([{ from: "a", to: "b" }], steps)).toEqual([{ id: "a->b", source: "a", target: "b" }]);
  });
});
