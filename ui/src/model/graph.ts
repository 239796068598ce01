/**
 * The workflow graph of a playbook: one node per step; edges from structural `next`, the `next`
 * targets of `case` entries (`then.next`), labelled with the case's event when it names one.
 * Layout (dagre, top to bottom) gives each node a position.
 */
import dagre from '@dagrejs/dagre';
import type { Playbook } from '../types.js';

export interface GraphNode { id: string; kind: string; loop: boolean; desc?: string; x: number; y: number }
export interface GraphEdge { id: string; source: string; target: string; label?: string; conditional: boolean }

export const NODE_WIDTH = 190;
export const NODE_HEIGHT = 58;

export function graphOf(pb: Playbook): { nodes: Omit<GraphNode, 'x' | 'y'>[]; edges: GraphEdge[] } {
  const names = new Set(pb.workflow.map((s) => s.step));
  const nodes = pb.workflow.map((s) => ({ id: s.step, kind: s.tool?.kind ?? 'route', loop: Boolean(s.loop), ...(s.desc ? { desc: s.desc } : {}) }));
  const edges: GraphEdge[] = [];
  const seen = new Set<string>();
  const add = (source: string, target: string, conditional: boolean, label?: string) => {
    if (!names.has(target)) return;
    const id = `${source}->${target}${conditional ? `?${label ?? ''}` : ''}`;
    if (seen.has(id)) return;
    seen.add(id);
    edges.push({ id, source, target, conditional, ...(label ? { label } : {}) });
  };
  for (const s of pb.workflow) {
    for (const c of s.case ?? []) {
      const label = /event\.name\s*==\s*['"]([^'"]+)['"]/.exec(c.when)?.[1] ?? c.when.replace(/^\{\{\s*|\s*\}\}$/g, '').slice(0, 40);
      for (const a of c.then ?? []) {
        if (a.action === 'next') for (const t of a.targets ?? []) add(s.step, t.step, true, label);
      }
    }
    for (const t of s.next ?? []) add(s.step, t.step, false);
  }
  return { nodes, edges };
}

export function layout(pb: Playbook): { nodes: GraphNode[]; edges: GraphEdge[] } {
  const { nodes, edges } = graphOf(pb);
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: 'TB', nodesep: 40, ranksep: 60 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of nodes) g.setNode(n.id, { width: NODE_WIDTH, height: NODE_HEIGHT });
  for (const e of edges) if (e.source !== e.target) g.setEdge(e.source, e.target);
  dagre.layout(g);
  return {
    nodes: nodes.map((n) => {
      const p = g.node(n.id);
      return { ...n, x: (p?.x ?? 0) - NODE_WIDTH / 2, y: (p?.y ?? 0) - NODE_HEIGHT / 2 };
    }),
    edges,
  };
}
