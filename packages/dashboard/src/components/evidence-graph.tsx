import { useState } from 'preact/hooks';
import { short, when } from '../format';
import type { EvidenceEvent, EvidenceGraph } from '../types';
import { layoutGraph, NODE_H, NODE_W } from './graph-layout';

/** A colour family per event kind: job, policy and routing, receipts, money. */
function tone(eventType: string): string {
  const kind = eventType.split('.')[0] ?? '';
  if (kind === 'receipt') return 'good';
  if (kind === 'ledger') return 'warn';
  if (kind === 'policy' || kind === 'routing') return 'info';
  return 'accent';
}

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function EventDetails(props: { event: EvidenceEvent }) {
  const e = props.event;
  return (
    <dl class="kv small" data-testid="event-details">
      <dt>Event</dt>
      <dd>
        {e.sequence}. <code>{e.event_type}</code>
      </dd>
      <dt>Summary</dt>
      <dd>{e.summary}</dd>
      <dt>At</dt>
      <dd>{when(e.created_at)}</dd>
      <dt>Subject</dt>
      <dd>
        <code>{e.subject_id}</code>
      </dd>
      <dt>Event hash</dt>
      <dd>
        <code class="wrap">{e.event_hash}</code>
      </dd>
      {Object.keys(e.metadata).length > 0 && (
        <>
          <dt>Metadata</dt>
          <dd>
            <pre class="command small">{JSON.stringify(e.metadata, null, 2)}</pre>
          </dd>
        </>
      )}
    </dl>
  );
}

/**
 * The evidence graph drawn as SVG: one box per event in sequence layers, arrows for edges
 * (`then` solid, others dashed and labelled). Every box is a button: Tab to it and press Enter
 * (or click) to see the event's fields and hash.
 */
export function EvidenceGraphView(props: { graph: EvidenceGraph }) {
  const { events, edges } = props.graph;
  const [selected, setSelected] = useState<string | undefined>(undefined);
  const layout = layoutGraph(events, edges);
  const chosen = events.find((e) => e.id === selected);
  return (
    <div class="graph">
      <div class="graph-canvas">
        <svg
          viewBox={`0 0 ${layout.width} ${layout.height}`}
          width={layout.width}
          height={layout.height}
          role="group"
          aria-label={`Evidence graph: ${events.length} events, ${edges.length} edges`}
          data-testid="evidence-graph"
        >
          <defs>
            <marker
              id="arrow"
              viewBox="0 0 10 10"
              refX="9"
              refY="5"
              markerWidth="7"
              markerHeight="7"
              orient="auto-start-reverse"
            >
              <path d="M0,0 L10,5 L0,10 z" class="arrow-head" />
            </marker>
          </defs>
          {layout.edges.map((e) => (
            <g
              key={`${e.edge.from_event_id}-${e.edge.to_event_id}-${e.edge.edge_type}`}
              class={`edge ${e.edge.edge_type === 'then' ? 'then' : 'other'}`}
              data-edge={e.edge.edge_type}
            >
              <path d={e.path} marker-end="url(#arrow)" />
              {e.edge.edge_type !== 'then' && (
                <text x={e.labelX} y={e.labelY}>
                  {e.edge.edge_type}
                </text>
              )}
            </g>
          ))}
          {layout.nodes.map((n) => {
            const active = n.event.id === selected;
            const choose = () => setSelected(active ? undefined : n.event.id);
            return (
              <g
                key={n.event.id}
                class={`node ${tone(n.event.event_type)}${active ? ' active' : ''}`}
                transform={`translate(${n.x},${n.y})`}
                // Lower case: SVG attributes are case-sensitive, and only `tabindex` makes it focusable.
                tabindex={0}
                role="button"
                aria-pressed={active ? 'true' : 'false'}
                aria-label={`Event ${n.event.sequence}: ${n.event.event_type}. ${n.event.summary}`}
                data-event-type={n.event.event_type}
                onClick={choose}
                onKeyDown={(ev) => {
                  if (ev.key === 'Enter' || ev.key === ' ') {
                    ev.preventDefault();
                    choose();
                  }
                }}
              >
                <rect width={NODE_W} height={NODE_H} rx="8" />
                <text x="10" y="19" class="node-title">
                  {n.event.sequence}. {clip(n.event.event_type, 26)}
                </text>
                <text x="10" y="36" class="node-sub">
                  {clip(n.event.summary, 34)}
                </text>
              </g>
            );
          })}
        </svg>
      </div>
      {chosen ? (
        <EventDetails event={chosen} />
      ) : (
        <p class="muted small">Select an event (click, or Tab and Enter) to see its fields and hash.</p>
      )}
      <details>
        <summary>Events as a list</summary>
        <ol class="small" data-testid="event-list">
          {[...events]
            .sort((a, b) => a.sequence - b.sequence)
            .map((e) => (
              <li key={e.id}>
                <code>{e.event_type}</code> · {e.summary} · <code title={e.event_hash}>{short(e.event_hash, 8)}</code>
                {edges
                  .filter((x) => x.to_event_id === e.id)
                  .map((x) => ` · ${x.edge_type} ${events.find((p) => p.id === x.from_event_id)?.sequence ?? '?'}`)
                  .join('')}
              </li>
            ))}
        </ol>
      </details>
    </div>
  );
}
