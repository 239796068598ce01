/** The workflow graph (React Flow, dagre layout): nodes coloured by state, loop progress n/m. */
import { Background, Controls, Handle, MarkerType, Position, ReactFlow, type Edge, type Node, type NodeProps } from '@xyflow/react';
import { useMemo } from 'react';
import { layout, NODE_HEIGHT, NODE_WIDTH } from '../model/graph.js';
import { shownState, stateLabel, type NodeState, type StepSummary } from '../model/steps.js';
import type { Execution, Playbook } from '../types.js';

type StepData = { name: string; kind: string; state: NodeState; progress?: string; childLink?: string; selected: boolean };

function StepNode({ data }: NodeProps<Node<StepData>>) {
  return (
    <div className={`node state-${data.state}${data.selected ? ' selected' : ''}`} data-step={data.name} data-state={data.state}>
      <Handle type="target" position={Position.Top} />
      <div className="node-name">{data.name}</div>
      <div className="node-meta">
        <span className="node-kind">{data.kind}</span>
        <span className="node-state">{stateLabel(data.state)}</span>
        {data.progress && <span className="node-progress" data-progress={data.progress}>{data.progress}</span>}
        {data.childLink && <a className="node-child" href={data.childLink} onClick={(e) => e.stopPropagation()}>child ↗</a>}
      </div>
      <Handle type="source" position={Position.Bottom} />
    </div>
  );
}

const nodeTypes = { step: StepNode };

export function WorkflowGraph({ playbook, steps, selected, onSelect, childLinks, executionStatus }: {
  playbook: Playbook;
  /** The execution's status: once it has ended, steps that never ran show `not run`. */
  executionStatus?: Execution['status'];
  steps?: Map<string, StepSummary>;
  selected?: string;
  onSelect?: (step: string) => void;
  childLinks?: Record<string, string>;
}) {
  const laid = useMemo(() => layout(playbook), [playbook]);
  const nodes: Node<StepData>[] = laid.nodes.map((n) => {
    const s = steps?.get(n.id);
    const loop = s?.loop;
    return {
      id: n.id,
      type: 'step',
      position: { x: n.x, y: n.y },
      // Fixed size (the layout's): nodes are shown without waiting for a measurement, which a
      // controlled flow re-rendered on every live update would otherwise lose.
      width: NODE_WIDTH,
      height: NODE_HEIGHT,
      data: {
        name: n.id,
        kind: n.loop ? `${n.kind} · loop` : n.kind,
        state: shownState(s?.state ?? 'pending', executionStatus),
        progress: loop ? `${loop.done}/${loop.total}` : undefined,
        childLink: childLinks?.[n.id],
        selected: selected === n.id,
      },
    };
  });
  const edges: Edge[] = laid.edges.map((e) => ({
    id: e.id,
    source: e.source,
    target: e.target,
    label: e.label,
    animated: steps?.get(e.source)?.state === 'running',
    className: e.conditional ? 'edge-case' : 'edge-next',
    markerEnd: { type: MarkerType.ArrowClosed },
  }));
  return (
    <div className="graph" data-testid="graph">
      <ReactFlow
        nodes={nodes}
        edges={edges}
        nodeTypes={nodeTypes}
        fitView
        fitViewOptions={{ maxZoom: 1 }}
        nodesDraggable={false}
        nodesConnectable={false}
        onNodeClick={(_e, n) => onSelect?.(n.id)}
        proOptions={{ hideAttribution: true }}
        minZoom={0.2}
      >
        <Background />
        <Controls showInteractive={false} />
      </ReactFlow>
    </div>
  );
}
