// A plugin workflow's graph for the console to draw: each step with the inputs it reads and
// the outputs it writes, and an edge from a step to each step reading its outputs. Pure.
import type * as pb from "@ephemera/proto";
import { stepDependencies } from "@ephemera/spec";

export interface Graph {
  nodes: Array<{ name: string; inputs: string[]; outputs: string[] }>;
  /** `label`: the outputs of `from` that `to` reads, comma-separated. */
  edges: Array<{ from: string; to: string; label: string }>;
}

export function workflowGraph(steps: pb.Step[]): Graph {
  const deps = stepDependencies(steps);
  const edges: Graph["edges"] = [];
  for (const step of steps) {
    for (const from of deps.get(step.name) ?? []) {
      const read = step.inputs.filter((i) => i.valueFromStep?.name === from).map((i) => i.valueFromStep?.output ?? "");
      edges.push({ from, to: step.name, label: [...new Set(read)].join(", ") });
    }
  }
  return {
    nodes: steps.map((s) => ({ name: s.name, inputs: s.inputs.map((i) => i.name), outputs: s.outputs.map((o) => o.name) })),
    edges,
  };
}
