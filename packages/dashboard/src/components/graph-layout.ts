/**
 * Lays out an evidence graph for drawing: events top to bottom in layers (an event sits one layer
 * below the deepest of its parents), edges as SVG paths. Pure: tested without a browser.
 */

export interface GraphEvent {
  id: string;
  sequence: number;
  event_type: string;
}

export interface GraphEdge {
  from_event_id: string;
  to_event_id: string;
  edge_type: string;
}

export interface PlacedNode<E extends GraphEvent> {
  event: E;
  layer: number;
  x: number;
  y: number;
}

export interface PlacedEdge {
  edge: GraphEdge;
  path: string;
  /** Where its label goes. */
  labelX: number;
  labelY: number;
  /** True when it skips layers and is drawn as a bow to the right. */
  bow: boolean;
}

export const NODE_W = 230;
export const NODE_H = 46;
const GAP_X = 24;
const GAP_Y = 34;
const PAD = 12;
const BOW_ROOM = 120;

/**
 * @example
 * const g = layoutGraph(events, edges);
 * g.nodes[0].y // 12: the first layer
 */
export function layoutGraph<E extends GraphEvent>(events: readonly E[], edges: readonly GraphEdge[]) {
  const ordered = [...events].sort((a, b) => a.sequence - b.sequence);
  const layerOf = new Map<string, number>();
  for (const e of ordered) {
    const parents = edges.filter((x) => x.to_event_id === e.id).map((x) => layerOf.get(x.from_event_id));
    const known = parents.filter((l): l is number => l !== undefined);
    layerOf.set(e.id, known.length ? Math.max(...known) + 1 : 0);
  }
  const layers = new Map<number, E[]>();
  for (const e of ordered) {
    const l = layerOf.get(e.id) ?? 0;
    layers.set(l, [...(layers.get(l) ?? []), e]);
  }
  const widest = Math.max(1, ...[...layers.values()].map((l) => l.length));
  const contentW = widest * NODE_W + (widest - 1) * GAP_X;
  const nodes: PlacedNode<E>[] = [];
  for (const [layer, members] of layers) {
    const rowW = members.length * NODE_W + (members.length - 1) * GAP_X;
    members.forEach((event, i) => {
      nodes.push({
        event,
        layer,
        x: PAD + (contentW - rowW) / 2 + i * (NODE_W + GAP_X),
        y: PAD + layer * (NODE_H + GAP_Y),
      });
    });
  }
  const at = new Map(nodes.map((n) => [n.event.id, n]));
  const placed: PlacedEdge[] = [];
  let bows = 0;
  for (const edge of edges) {
    const from = at.get(edge.from_event_id);
    const to = at.get(edge.to_event_id);
    if (!from || !to) continue;
    if (to.layer - from.layer === 1) {
      const x1 = from.x + NODE_W / 2;
      const y1 = from.y + NODE_H;
      const x2 = to.x + NODE_W / 2;
      const y2 = to.y;
      const mid = (y1 + y2) / 2;
      placed.push({
        edge,
        path: `M${x1},${y1} C${x1},${mid} ${x2},${mid} ${x2},${y2}`,
        labelX: (x1 + x2) / 2 + 6,
        labelY: mid + 4,
        bow: false,
      });
    } else {
      // Skipping layers (or within one): a bow out to the right, wider for each such edge.
      bows += 1;
      const x1 = from.x + NODE_W;
      const y1 = from.y + NODE_H / 2;
      const x2 = to.x + NODE_W;
      const y2 = to.y + NODE_H / 2;
      const out = Math.max(x1, x2) + 24 + 18 * bows;
      // A cubic whose two control points sit at `out` reaches 3/4 of the way there at its middle.
      placed.push({
        edge,
        path: `M${x1},${y1} C${out},${y1} ${out},${y2} ${x2},${y2}`,
        labelX: 0.25 * x1 + 0.75 * out + 4,
        labelY: (y1 + y2) / 2 + 4,
        bow: true,
      });
    }
  }
  const height = PAD * 2 + layers.size * NODE_H + Math.max(0, layers.size - 1) * GAP_Y;
  const width = PAD * 2 + contentW + (bows > 0 ? BOW_ROOM + 18 * bows : 0);
  return { width, height, nodes, edges: placed };
}
