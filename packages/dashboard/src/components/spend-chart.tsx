import { api } from '../api';
import { money } from '../format';
import { useAsync } from '../hooks';
import type { SpendSeries } from '../types';
import { BarChart } from './bar-chart';
import { ErrorNotice, Loading } from './ui';

/** Daily spend of the organization over the last `days` days (GET /api/v1/billing/spend). */
export function SpendChart(props: { days: number }) {
  const spend = useAsync(
    (signal) => api<SpendSeries>('/api/v1/billing/spend', { query: { days: props.days }, signal }),
    [props.days],
  );
  if (spend.error) return <ErrorNotice error={spend.error} prefix="Spend" />;
  if (!spend.data) return <Loading what="spend" />;
  const bars = spend.data.series.map((d) => ({ label: d.date.slice(5), value: d.spend_cents }));
  const busiest = spend.data.series.reduce((a, b) => (b.spend_cents > a.spend_cents ? b : a), {
    date: '',
    spend_cents: 0,
    credit_cents: 0,
  });
  const summary = `${money(spend.data.total_spend_cents)} spent in the last ${props.days} days${busiest.spend_cents > 0 ? `; most on ${busiest.date} (${money(busiest.spend_cents)})` : ''}.`;
  return (
    <>
      <p class="muted small" data-testid="spend-summary">
        {summary}
      </p>
      <BarChart title={`Spend per day, last ${props.days} days`} summary={summary} bars={bars} format={money} />
    </>
  );
}
