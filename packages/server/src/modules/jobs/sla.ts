import type { PlatformServices } from '../../platform/services.js';
import type { Principal } from '../../platform/principal.js';

/** Below this many samples a figure is reported but flagged `insufficient_sample`. */
export const MIN_SLA_SAMPLE = 20;
export const SLA_TARGETS = { p95AssignmentMs: 5_000, successRate: 0.99 };

/** Nearest-rank percentile of sorted numbers; 0 for none. */
export function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? 0;
}

/** The organization's marketplace SLA over the last `windowHours`, from the jobs' own timestamps. */
export async function sla(ctx: PlatformServices, principal: Principal, windowHours: number) {
  const since = new Date(Date.now() - windowHours * 3600_000);
  const { rows: counts } = await ctx.db.query<{ status: string; n: number }>(
    'SELECT status, count(*)::int AS n FROM jobs WHERE org_id = $1 AND created_at >= $2 GROUP BY status',
    [principal.orgId, since],
  );
  const totals: Record<string, number> = {
    submitted: 0,
    pending: 0,
    assigned: 0,
    running: 0,
    completed: 0,
    failed: 0,
    cancelled: 0,
  };
  for (const row of counts) totals[row.status] = row.n;
  totals.submitted = Object.values(totals).reduce((a, b) => a + b, 0);
  totals.finished = (totals.completed ?? 0) + (totals.failed ?? 0) + (totals.cancelled ?? 0);
  const { rows: latencies } = await ctx.db.query<{ ms: number }>(
    `SELECT (extract(epoch FROM (assigned_at - pending_at)) * 1000)::float8 AS ms FROM jobs
      WHERE org_id = $1 AND assigned_at >= $2 AND pending_at IS NOT NULL ORDER BY ms`,
    [principal.orgId, since],
  );
  const samples = latencies.map((r) => r.ms);
  const p95 = percentile(samples, 0.95);
  const terminal = (totals.completed ?? 0) + (totals.failed ?? 0);
  const successRate = terminal === 0 ? 1 : (totals.completed ?? 0) / terminal;
  return {
    window_hours: windowHours,
    window_since: since.toISOString(),
    generated_at: new Date().toISOString(),
    totals,
    assignment: {
      samples: samples.length,
      p50_latency_ms: Math.round(percentile(samples, 0.5) * 100) / 100,
      p95_latency_ms: Math.round(p95 * 100) / 100,
      target_p95_ms: SLA_TARGETS.p95AssignmentMs,
      meets_target: p95 <= SLA_TARGETS.p95AssignmentMs,
      insufficient_sample: samples.length < MIN_SLA_SAMPLE,
    },
    completion: {
      in_flight_jobs: (totals.pending ?? 0) + (totals.assigned ?? 0) + (totals.running ?? 0),
      terminal_jobs_considered: terminal,
      success_rate: Math.round(successRate * 10_000) / 10_000,
      target_success_rate: SLA_TARGETS.successRate,
      meets_target: successRate >= SLA_TARGETS.successRate,
      insufficient_sample: terminal < MIN_SLA_SAMPLE,
    },
  };
}
