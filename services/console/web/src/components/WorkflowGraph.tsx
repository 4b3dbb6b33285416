// A workflow drawn as its graph: steps as nodes, left to right in dependency order (dagre),
// edges from each step to the steps reading its outputs. With statuses (a sandbox's resource)
// each node is coloured by its step's status and links to the step's page; without (a
// plugin's spec) it shows the spec's shape.
import dagre from "@dagrejs/dagre";
import { Handle, Position, ReactFlow, type Edge, type Node, type NodeHandle, type NodeProps } from "@xyflow/react";
import { memo, useMemo } from "react";
import { Link } from "wouter";
import { duration, parseTime } from "../format";
import { useNow } from "../hooks";
import type { StepAttempt } from "../types";
import { mergeEdges, type GraphEdge, type GraphStep } from "../workflow";
import { tone } from "./common";

interface StepData extends Record<string, unknown> { step: GraphStep; phase: string; withStatus: boolean }

const WIDTH = 200;
const HEIGHT = 66;

/** How long the step's latest attempt ran (or has been running, or waited in the queue). */
function timing(attempts: StepAttempt[] | undefined, now: number): string {
  const last = attempts?.[attempts.length - 1];
  if (!last) return "";
  const started = parseTime(last.startedAt);
  const ended = parseTime(last.endedAt);
  if (started !== undefined) return duration((ended ?? now) - started);
  const queued = parseTime(last.queuedAt);
  if (queued !== undefined) return `queued ${duration((ended ?? now) - queued)}`;
  return "";
}

const StepNode = memo(function StepNode({ data }: NodeProps<Node<StepData>>) {
  const { step, phase, withStatus } = data;
  const status = step.status || "Pending";
  const running = status === "Running" || status === "Queued" || status === "Retrying";
  const now = useNow(1000, withStatus && running);
  const attempts = step.attempts?.length ?? 0;
  const body = (
    <>
      <span className="step-name">{step.name}</span>
      {withStatus ? (
        <span className="step-meta">
          <span>{status}</span>
          {attempts > 1 && <span>×{attempts}</span>}
          <span className="step-time">{timing(step.attempts, now)}</span>
        </span>
      ) : (
        step.detail && <span className="step-meta">{step.detail}</span>
      )}
    </>
  );
  return (
    <div className={`step-node tone-${withStatus ? tone(status) : "plain"}`} data-testid={`step-${phase}-${step.name}`}
      {...(withStatus ? { "data-status": status } : {})}>
      <Handle type="target" position={Position.Left} isConnectable={false} />
      {step.href ? <Link href={step.href} className="step-link nodrag nopan">{body}</Link> : <div className="step-link">{body}</div>}
      <Handle type="source" position={Position.Right} isConnectable={false} />
    </div>
  );
});

const nodeTypes = { step: StepNode };

const HANDLES: NodeHandle[] = [
  { type: "target", position: Position.Left, x: 0, y: HEIGHT / 2, width: 1, height: 1 },
  { type: "source", position: Position.Right, x: WIDTH - 1, y: HEIGHT / 2, width: 1, height: 1 },
];

function layout(steps: GraphStep[], edges: GraphEdge[], phase: string, withStatus: boolean) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "LR", nodesep: 20, ranksep: 56, marginx: 8, marginy: 8 });
  g.setDefaultEdgeLabel(() => ({}));
  const merged = mergeEdges(edges, steps);
  for (const s of steps) g.setNode(s.name, { width: WIDTH, height: HEIGHT });
  for (const e of merged) g.setEdge(e.source, e.target);
  dagre.layout(g);
  let height = 0;
  let width = 0;
  const nodes: Node<StepData>[] = steps.map((step) => {
    const at = g.node(step.name) as { x: number; y: number };
    height = Math.max(height, at.y + HEIGHT / 2);
    width = Math.max(width, at.x + WIDTH / 2);
    return {
      id: step.name, type: "step", position: { x: at.x - WIDTH / 2, y: at.y - HEIGHT / 2 },
      data: { step, phase, withStatus }, width: WIDTH, height: HEIGHT,
      // Known sizes and handles: a live update gives React Flow new node objects, and without
      // these it drops the handles' bounds until a resize that never comes, and the edges with them.
      measured: { width: WIDTH, height: HEIGHT }, handles: HANDLES,
      draggable: false, selectable: false, connectable: false, focusable: false,
    };
  });
  const flowEdges: Edge[] = merged.map((e) => {
    const running = withStatus && steps.find((s) => s.name === e.target)?.status === "Running";
    return { ...e, animated: running, focusable: false, selectable: false };
  });
  return { nodes, edges: flowEdges, height: height + 16, width: width + 16 };
}

export function WorkflowGraph({ phase, steps, edges, withStatus = true }:
  { phase: string; steps: GraphStep[]; edges: GraphEdge[]; withStatus?: boolean }) {
  const graph = useMemo(() => layout(steps, edges, phase, withStatus), [steps, edges, phase, withStatus]);
  if (!steps.length) return <p className="muted">No {phase} steps.</p>;
  return (
    // At its natural size, scrolled sideways where the screen is narrower than the graph.
    <div className="workflow-graph" role="group" aria-label={`${phase} workflow`}>
      <div style={{ height: Math.min(Math.max(graph.height + 24, 110), 520), width: graph.width + 32, minWidth: "100%" }}>
      <ReactFlow nodes={graph.nodes} edges={graph.edges} nodeTypes={nodeTypes} colorMode="system"
        fitView fitViewOptions={{ padding: 0.08, maxZoom: 1 }} minZoom={0.5} maxZoom={1.5}
        nodesDraggable={false} nodesConnectable={false} nodesFocusable={false} edgesFocusable={false}
        elementsSelectable={false} zoomOnScroll={false} preventScrolling={false} zoomOnDoubleClick={false}
        proOptions={{ hideAttribution: true }} />
      </div>
    </div>
  );
}
