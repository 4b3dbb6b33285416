// The DAG of a phase: a step depends on the steps of the same phase whose outputs it reads.
import type * as pb from "@ephemera/proto";

/** Same-phase dependencies of each step, in order of first reference; references to steps outside `steps` are not edges. */
export function stepDependencies(steps: pb.Step[]): Map<string, string[]> {
  const names = new Set(steps.map((s) => s.name));
  const deps = new Map<string, string[]>();
  for (const step of steps) {
    const own = deps.get(step.name) ?? [];
    for (const input of step.inputs) {
      const from = input.valueFromStep?.name;
      if (from !== undefined && names.has(from) && !own.includes(from)) own.push(from);
    }
    deps.set(step.name, own);
  }
  return deps;
}

/**
 * One cycle per strongly connected component that has one, as the list of nodes
 * [a, b, ..., a] where each node depends on the next. Nodes are indices; `deps[i]`
 * lists the indices node i depends on.
 */
export function findCycles(deps: readonly (readonly number[])[]): number[][] {
  const cycles: number[][] = [];
  for (const component of stronglyConnected(deps)) {
    const members = new Set(component);
    const start = Math.min(...component);
    const selfLoop = deps[start]?.includes(start) ?? false;
    if (component.length === 1 && !selfLoop) continue;
    const path = selfLoop ? [start] : pathBack(start, members, deps);
    cycles.push([...path, start]);
  }
  return cycles.sort((a, b) => (a[0] ?? 0) - (b[0] ?? 0));
}

/** A path start -> ... -> (a node depending on start), inside one component (breadth-first: shortest). */
function pathBack(start: number, members: Set<number>, deps: readonly (readonly number[])[]): number[] {
  const parent = new Map<number, number>([[start, -1]]);
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift() as number;
    for (const next of deps[node] ?? []) {
      if (!members.has(next)) continue;
      if (next === start) {
        const path = [node];
        for (let p = parent.get(node) ?? -1; p !== -1; p = parent.get(p) ?? -1) path.unshift(p);
        return path;
      }
      if (!parent.has(next)) {
        parent.set(next, node);
        queue.push(next);
      }
    }
  }
  return [start];
}

/** Tarjan's algorithm, iterative so deep chains cannot overflow the stack. */
function stronglyConnected(deps: readonly (readonly number[])[]): number[][] {
  const index = new Map<number, number>();
  const low = new Map<number, number>();
  const onStack = new Set<number>();
  const stack: number[] = [];
  const components: number[][] = [];
  let counter = 0;
  for (let root = 0; root < deps.length; root++) {
    if (index.has(root)) continue;
    const work: { node: number; next: number }[] = [{ node: root, next: 0 }];
    index.set(root, counter);
    low.set(root, counter++);
    stack.push(root);
    onStack.add(root);
    while (work.length > 0) {
      const frame = work[work.length - 1] as { node: number; next: number };
      const edges = deps[frame.node] ?? [];
      if (frame.next < edges.length) {
        const to = edges[frame.next++] as number;
        if (to < 0 || to >= deps.length) continue;
        if (!index.has(to)) {
          index.set(to, counter);
          low.set(to, counter++);
          stack.push(to);
          onStack.add(to);
          work.push({ node: to, next: 0 });
        } else if (onStack.has(to)) {
          low.set(frame.node, Math.min(low.get(frame.node) as number, index.get(to) as number));
        }
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent) low.set(parent.node, Math.min(low.get(parent.node) as number, low.get(frame.node) as number));
      if (low.get(frame.node) === index.get(frame.node)) {
        const component: number[] = [];
        let member: number;
        do {
          member = stack.pop() as number;
          onStack.delete(member);
          component.push(member);
        } while (member !== frame.node);
        components.push(component);
      }
    }
  }
  return components;
}
