import { useId } from 'preact/hooks';
import { labelEvery, niceTicks } from './scale';
import { DataTable } from './ui';

export interface Bar {
  label: string;
  value: number;
}

/**
 * A bar chart drawn as SVG (no library, nothing loaded). Screen readers get the summary as the
 * image's name and the numbers as a table behind a disclosure.
 */
export function BarChart(props: {
  title: string;
  summary: string;
  bars: Bar[];
  format: (v: number) => string;
  height?: number;
}) {
  const id = useId();
  const width = 640;
  const height = props.height ?? 180;
  const pad = { top: 12, right: 8, bottom: 28, left: 64 };
  const innerW = width - pad.left - pad.right;
  const innerH = height - pad.top - pad.bottom;
  const { max, ticks } = niceTicks(Math.max(0, ...props.bars.map((b) => b.value)));
  const slot = innerW / Math.max(1, props.bars.length);
  const barW = Math.max(2, slot * 0.7);
  const every = labelEvery(props.bars.length, 8);
  const y = (v: number) => pad.top + innerH - (v / max) * innerH;
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${width} ${height}`} role="img" aria-labelledby={`${id}-t ${id}-d`}>
        <title id={`${id}-t`}>{props.title}</title>
        <desc id={`${id}-d`}>{props.summary}</desc>
        {ticks.map((t) => (
          <g key={t} class="tick">
            <line x1={pad.left} x2={width - pad.right} y1={y(t)} y2={y(t)} />
            <text x={pad.left - 6} y={y(t) + 4} text-anchor="end">
              {props.format(t)}
            </text>
          </g>
        ))}
        {props.bars.map((b, i) => (
          <g key={b.label}>
            <rect
              class="bar"
              x={pad.left + i * slot + (slot - barW) / 2}
              y={y(b.value)}
              width={barW}
              height={Math.max(0, pad.top + innerH - y(b.value))}
            >
              <title>{`${b.label}: ${props.format(b.value)}`}</title>
            </rect>
            {i % every === 0 && (
              <text class="axis-label" x={pad.left + i * slot + slot / 2} y={height - 8} text-anchor="middle">
                {b.label}
              </text>
            )}
          </g>
        ))}
      </svg>
      <details>
        <summary>Show the numbers</summary>
        <DataTable caption={props.title} columns={['Day', 'Value']}>
          {props.bars.map((b) => (
            <tr key={b.label}>
              <td>{b.label}</td>
              <td>{props.format(b.value)}</td>
            </tr>
          ))}
        </DataTable>
      </details>
    </figure>
  );
}
