import { useState } from 'preact/hooks';
import { api } from '../api';
import { ErrorNotice, Field, Loading, Page, Section, Stat } from '../components/ui';
import { duration, percent, when } from '../format';
import { useAsync } from '../hooks';
import type { Sla } from '../types';

const WINDOWS = [
  { hours: 1, label: 'Last hour' },
  { hours: 24, label: 'Last 24 hours' },
  { hours: 168, label: 'Last 7 days' },
  { hours: 720, label: 'Last 30 days' },
];

/**
 * A measured value against its target on one horizontal scale, drawn as SVG. `better` says
 * which side of the target is good.
 */
function Gauge(props: {
  label: string;
  value: number;
  target: number;
  max: number;
  better: 'below' | 'above';
  format: (v: number) => string;
}) {
  const w = 400;
  const x = (v: number) => Math.min(w, Math.max(0, (v / props.max) * w));
  const ok = props.better === 'below' ? props.value <= props.target : props.value >= props.target;
  return (
    <svg
      class="gauge"
      viewBox={`0 0 ${w} 34`}
      role="img"
      aria-label={`${props.label}: ${props.format(props.value)} against a target of ${props.format(props.target)}; ${ok ? 'meets' : 'misses'} it`}
    >
      <rect x="0" y="8" width={w} height="12" rx="6" class="track" />
      <rect x="0" y="8" width={x(props.value)} height="12" rx="6" class={ok ? 'fill good' : 'fill bad'} />
      <line x1={x(props.target)} x2={x(props.target)} y1="2" y2="26" class="target" />
      <text
        x={Math.min(w - 4, x(props.target) + 4)}
        y="33"
        class="small-text"
        text-anchor={x(props.target) > w - 80 ? 'end' : 'start'}
      >
        target {props.format(props.target)}
      </text>
    </svg>
  );
}

function Verdict(props: { meets: boolean; insufficient: boolean }) {
  return (
    <p class={`verdict ${props.meets ? 'good' : 'bad'}`}>
      {props.meets ? 'Meets the target' : 'Misses the target'}
      {props.insufficient && <span class="muted small"> · fewer than 20 samples: not yet conclusive</span>}
    </p>
  );
}

export function SlaPage() {
  const [hours, setHours] = useState(24);
  const sla = useAsync(
    (signal) => api<Sla>('/api/v1/marketplace/sla', { query: { window_hours: hours }, signal }),
    [hours],
  );
  const s = sla.data;
  return (
    <Page
      title="SLA"
      intro="How fast your jobs are assigned to a node and how many complete, measured from the jobs' own timestamps."
    >
      <div class="narrow">
        <Field label="Window">
          {(id) => (
            <select id={id} value={String(hours)} onChange={(e) => setHours(Number(e.currentTarget.value))}>
              {WINDOWS.map((w) => (
                <option key={w.hours} value={String(w.hours)}>
                  {w.label}
                </option>
              ))}
            </select>
          )}
        </Field>
      </div>
      <ErrorNotice error={sla.error} />
      {!s && <Loading what="the SLA" />}
      {s && (
        <>
          <Section title="Assignment latency">
            <dl class="stats">
              <Stat label="p50" value={duration(s.assignment.p50_latency_ms)} />
              <Stat
                label="p95"
                value={duration(s.assignment.p95_latency_ms)}
                note={`target ≤ ${duration(s.assignment.target_p95_ms)}`}
              />
              <Stat label="Samples" value={String(s.assignment.samples)} />
            </dl>
            <Gauge
              label="p95 assignment latency"
              value={s.assignment.p95_latency_ms}
              target={s.assignment.target_p95_ms}
              max={Math.max(s.assignment.target_p95_ms * 2, s.assignment.p95_latency_ms * 1.1)}
              better="below"
              format={duration}
            />
            <Verdict meets={s.assignment.meets_target} insufficient={s.assignment.insufficient_sample} />
          </Section>
          <Section title="Success rate">
            <dl class="stats">
              <Stat
                label="Completed of finished"
                value={percent(s.completion.success_rate)}
                note={`target ≥ ${percent(s.completion.target_success_rate)}`}
              />
              <Stat label="Finished jobs considered" value={String(s.completion.terminal_jobs_considered)} />
              <Stat label="In flight" value={String(s.completion.in_flight_jobs)} />
            </dl>
            <Gauge
              label="Success rate"
              value={s.completion.success_rate}
              target={s.completion.target_success_rate}
              max={1}
              better="above"
              format={percent}
            />
            <Verdict meets={s.completion.meets_target} insufficient={s.completion.insufficient_sample} />
          </Section>
          <Section title="Jobs in the window">
            <dl class="stats">
              {Object.entries(s.totals).map(([k, v]) => (
                <Stat key={k} label={k} value={String(v)} />
              ))}
            </dl>
            <p class="muted small">
              From {when(s.window_since)} to {when(s.generated_at)}
            </p>
          </Section>
        </>
      )}
    </Page>
  );
}
