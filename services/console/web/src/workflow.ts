// A resource's workflow as a graph to draw: every step its plugin's spec declares (so a workflow
// not yet run shows, Pending), with the status and attempts of the step views the sandbox has,
// and the edges both name. Pure, so it is tested without a browser (test/console).
import type { Graph, ResourceView, StepAttempt } from "./types.js";

export interface GraphStep {
  name: string;
  status?: string;
  attempts?: StepAttempt[];
  detail?: string;
  href?: string;
}

export interface GraphEdge { from: string; to: string; label?: string }

export function workflow(sandbox: string, resource: ResourceView, phase: string, spec: Graph | undefined): { steps: GraphStep[]; edges: GraphEdge[] } {
  const views = (resource.steps ?? []).filter((s) => (s.phase || "create") === phase);
  const byName = new Map(views.map((s) => [s.name, s]));
  const names = [...(spec?.nodes ?? []).map((n) => n.name), ...views.map((s) => s.name)];
  const steps: GraphStep[] = [...new Set(names)].map((name) => {
    const view = byName.get(name);
    return {
      name,
      status: view?.status || "Pending",
      attempts: view?.attempts,
      href: `/sandboxes/${encodeURIComponent(sandbox)}/resources/${encodeURIComponent(resource.name)}/${phase}/${encodeURIComponent(name)}`,
    };
  });
  const edges: GraphEdge[] = [
    ...views.flatMap((s) => (s.dependsOn ?? []).map((from) => ({ from, to: s.name }))),
    ...(spec?.edges ?? []),
  ];
  return { steps, edges };
}

/** One edge per pair of steps between known steps, labelled with every output the later one reads. */
export function mergeEdges(edges: GraphEdge[], steps: GraphStep[]): { id: string; source: string; target: string; label?: string }[] {
  const names = new Set(steps.map((s) => s.name));
  const pairs = new Map<string, { source: string; target: string; names: string[] }>();
  for (const e of edges) {
    if (!names.has(e.from) || !names.has(e.to) || e.from === e.to) continue;
    const id = `${e.from}->${e.to}`;
    const pair = pairs.get(id) ?? { source: e.from, target: e.to, names: [] };
    if (e.label && !pair.names.includes(e.label)) pair.names.push(e.label);
    pairs.set(id, pair);
  }
  return [...pairs].map(([id, { source, target, names: labels }]) => ({ id, source, target, ...(labels.length ? { label: labels.join(", ") } : {}) }));
}
