import { describe, expect, it } from 'vitest';
import { layoutGraph, NODE_H, NODE_W } from './graph-layout';

const ev = (n: number, type = `e.${n}`) => ({ id: `evt_${n}`, sequence: n, event_type: type });
const edge = (from: number, to: number, edge_type = 'then') => ({
  from_event_id: `evt_${from}`,
  to_event_id: `evt_${to}`,
  edge_type,
});

describe('evidence graph layout', () => {
  it('puts a chain one event per layer, top to bottom, joined by straight-down curves', () => {
    const g = layoutGraph([ev(2), ev(1), ev(3)], [edge(1, 2), edge(2, 3)]);
    expect(g.nodes.map((n) => [n.event.id, n.layer])).toEqual([
      ['evt_1', 0],
      ['evt_2', 1],
      ['evt_3', 2],
    ]);
    const [a, b] = g.nodes;
    expect(b && a && b.y - a.y).toBeGreaterThan(NODE_H);
    expect(g.edges.every((e) => !e.bow && e.path.startsWith('M'))).toBe(true);
    expect(g.edges[0]?.path).toBe(
      `M${(a?.x ?? 0) + NODE_W / 2},${(a?.y ?? 0) + NODE_H} C${(a?.x ?? 0) + NODE_W / 2},${((a?.y ?? 0) + NODE_H + (b?.y ?? 0)) / 2} ${(b?.x ?? 0) + NODE_W / 2},${((a?.y ?? 0) + NODE_H + (b?.y ?? 0)) / 2} ${(b?.x ?? 0) + NODE_W / 2},${b?.y ?? 0}`,
    );
  });

  it('places siblings side by side in one layer and widens the drawing for them', () => {
    const g = layoutGraph([ev(1), ev(2), ev(3)], [edge(1, 2), edge(1, 3, 'caused_by')]);
    const [, left, right] = g.nodes;
    expect([left?.layer, right?.layer]).toEqual([1, 1]);
    expect(left?.y).toBe(right?.y);
    expect((right?.x ?? 0) - (left?.x ?? 0)).toBeGreaterThanOrEqual(NODE_W);
    expect(g.width).toBeGreaterThanOrEqual(2 * NODE_W);
  });

  it('draws an edge that skips layers as a bow to the right, inside the drawing', () => {
    const g = layoutGraph([ev(1), ev(2), ev(3)], [edge(1, 2), edge(2, 3), edge(1, 3, 'caused_by')]);
    const bow = g.edges.find((e) => e.edge.edge_type === 'caused_by');
    expect(bow?.bow).toBe(true);
    expect(bow?.labelX ?? Infinity).toBeLessThan(g.width);
    expect(g.height).toBe(12 * 2 + 3 * NODE_H + 2 * 34);
  });

  it('ignores edges to events it does not have, and an empty graph is drawable', () => {
    expect(layoutGraph([ev(1)], [edge(1, 9)]).edges).toEqual([]);
    const empty = layoutGraph([], []);
    expect(empty.nodes).toEqual([]);
    expect(empty.width).toBeGreaterThan(0);
  });
});
