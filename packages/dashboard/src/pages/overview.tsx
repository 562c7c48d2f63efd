import { api } from '../api';
import { useSession } from '../session-context';
import { SpendChart } from '../components/spend-chart';
import { DataTable, Empty, ErrorNotice, Loading, Page, Section, Stat, Status } from '../components/ui';
import { ago, money, short } from '../format';
import { useAsync } from '../hooks';
import { Link } from '../router';
import type { GatewayRequest, InferenceHealth, Job, NodeSummary } from '../types';
import { BalanceStats } from './billing';
import { JobTable } from './jobs';

function RecentRequests() {
  const requests = useAsync(
    (signal) => api<{ requests: GatewayRequest[] }>('/api/v1/gateway/requests', { query: { limit: 5 }, signal }),
    [],
    { pollMs: 15_000 },
  );
  if (requests.error) return <ErrorNotice error={requests.error} />;
  if (!requests.data) return <Loading what="requests" />;
  if (requests.data.requests.length === 0)
    return (
      <Empty>
        No gateway requests yet: try the <Link href="/playground">playground</Link>.
      </Empty>
    );
  return (
    <DataTable
      caption="Recent gateway requests"
      testId="requests"
      columns={['Request', 'Model', 'Status', 'Country', { label: 'Charged', numeric: true }, 'When']}
    >
      {requests.data.requests.map((r) => (
        <tr key={r.id}>
          <td>
            <code title={r.id}>{short(r.id, 10)}</code>
          </td>
          <td>
            {r.model} <span class="muted small">{r.type}</span>
          </td>
          <td>
            <Status value={r.status} />
          </td>
          <td>{r.country ?? '—'}</td>
          <td class="num">{r.charged_cents === null ? '—' : money(r.charged_cents)}</td>
          <td>{ago(r.created_at)}</td>
        </tr>
      ))}
    </DataTable>
  );
}

function NodeHealth() {
  const health = useAsync((signal) => api<InferenceHealth>('/api/v1/inference/health', { signal }), [], {
    pollMs: 15_000,
  });
  const mine = useAsync(
    (signal) =>
      api<{ nodes: NodeSummary[]; total: number }>('/api/v1/nodes', { query: { scope: 'mine', limit: 200 }, signal }),
    [],
    { pollMs: 15_000 },
  );
  const h = health.data;
  const online = mine.data?.nodes.filter((n) => n.status === 'online').length ?? 0;
  return (
    <>
      <ErrorNotice error={health.error ?? mine.error} />
      <dl class="stats" data-testid="node-health">
        <Stat
          label="Chat models with capacity"
          value={h ? `${h.chat_models_with_capacity} of ${h.chat_models_in_catalog}` : '…'}
        />
        <Stat
          label="Nodes online (5 min)"
          value={h ? String(h.online_nodes_heartbeat_5m) : '…'}
          note={h ? `${h.registered_nodes} registered on the network` : undefined}
        />
        <Stat
          label="Your nodes online"
          value={mine.data ? `${online} of ${mine.data.total}` : '…'}
          note={<Link href="/nodes">details</Link>}
        />
      </dl>
    </>
  );
}

export function OverviewPage() {
  const { session } = useSession();
  const jobs = useAsync(
    (signal) => api<{ jobs: Job[] }>('/api/v1/marketplace/jobs', { query: { limit: 5 }, signal }),
    [],
    { pollMs: 15_000 },
  );
  return (
    <Page title="Overview" intro={`${session.organization.name}, as ${session.name || session.email}.`}>
      <Section title="Balance" actions={<Link href="/billing">Billing</Link>}>
        <BalanceStats />
      </Section>
      <Section title="Spend over time">
        <SpendChart days={14} />
      </Section>
      <div class="grid-2">
        <Section title="Recent jobs" actions={<Link href="/jobs">All jobs</Link>}>
          <ErrorNotice error={jobs.error} />
          {!jobs.data && !jobs.error && <Loading what="jobs" />}
          {jobs.data && jobs.data.jobs.length === 0 && <Empty>No jobs yet.</Empty>}
          {jobs.data && jobs.data.jobs.length > 0 && <JobTable jobs={jobs.data.jobs} caption="Recent jobs" compact />}
        </Section>
        <Section title="Recent requests" actions={<Link href="/playground">Playground</Link>}>
          <RecentRequests />
        </Section>
      </div>
      <Section title="Node health">
        <NodeHealth />
      </Section>
    </Page>
  );
}
