import { useState } from 'preact/hooks';
import { api } from '../api';
import { Button, DataTable, Done, Empty, ErrorNotice, Loading, Page, Pager, Section, Status } from '../components/ui';
import { short, when } from '../format';
import { useAction, useAsync } from '../hooks';
import { Link } from '../router';
import { EvidenceSection } from './evidence';

/** The fields of a work order (DESIGN.md section 15) this page shows. */
interface WorkOrder {
  id: string;
  status: string;
  goal: string;
  title: string | null;
  repository_url: string;
  base_branch: string;
  work_branch: string;
  policy_preset: string;
  trust_tier: string;
  decision: { certification: string; reasons: string[] } | null;
  changed_paths: string[];
  checks: { command: string; exit_code: number | null; output_sha256: string }[];
  approvals: { decision: string; by: string; role: string; reason: string | null; at: string }[];
  pr_url: string | null;
  commit_sha: string | null;
  rollback_point: string | null;
  rollback: { outcome: string; branch: string | null } | null;
  failure_reason: string | null;
  created_at: string;
}

const PAGE = 25;

export function WorkOrdersPage() {
  const [offset, setOffset] = useState(0);
  const orders = useAsync(
    (signal) =>
      api<{ orders: WorkOrder[]; total: number }>('/api/v1/work/orders', { query: { limit: PAGE, offset }, signal }),
    [offset],
    { pollMs: 5000 },
  );
  return (
    <Page
      title="Work orders"
      intro="Repository changes made by capsules on nodes, certified against their policy. Create them with the API (POST /api/v1/work/orders; docs/work-orders.md)."
    >
      <Section title="All work orders">
        <ErrorNotice error={orders.error} />
        {orders.loading && !orders.data && <Loading what="work orders" />}
        {orders.data && orders.data.orders.length === 0 && <Empty>No work orders yet.</Empty>}
        {orders.data && orders.data.orders.length > 0 && (
          <>
            <DataTable
              caption="Work orders"
              testId="work-orders"
              columns={[
                'Order',
                'Title',
                'Status',
                'Decision',
                { label: 'Paths', numeric: true },
                'Pull request',
                'Created',
              ]}
            >
              {orders.data.orders.map((o) => (
                <tr key={o.id}>
                  <td>
                    <Link href={`/work-orders/${o.id}`}>
                      <code>{short(o.id, 8)}</code>
                    </Link>
                  </td>
                  <td>{o.title ?? o.goal.slice(0, 80)}</td>
                  <td>
                    <Status value={o.status} />
                  </td>
                  <td>{o.decision ? <Status value={o.decision.certification} /> : '—'}</td>
                  <td class="num">{o.changed_paths.length}</td>
                  <td>{o.pr_url ? <a href={o.pr_url}>{o.pr_url.replace(/^https?:\/\//, '')}</a> : '—'}</td>
                  <td>{when(o.created_at)}</td>
                </tr>
              ))}
            </DataTable>
            <Pager
              offset={offset}
              limit={PAGE}
              total={orders.data.total}
              shown={orders.data.orders.length}
              onChange={setOffset}
              what="Work orders"
            />
          </>
        )}
      </Section>
    </Page>
  );
}

export function WorkOrderPage(props: { id: string }) {
  const order = useAsync((signal) => api<WorkOrder>(`/api/v1/work/orders/${props.id}`, { signal }), [props.id], {
    pollMs: 5000,
  });
  const diff = useAsync(
    (signal) => api<{ diff: string; diff_truncated: boolean }>(`/api/v1/work/orders/${props.id}/diff`, { signal }),
    [props.id, order.data?.status],
  );
  const act = useAction(async (action: 'approve' | 'reject') => {
    await api(`/api/v1/work/orders/${props.id}/${action}`, { body: {} });
    order.reload();
    return action === 'approve' ? 'Approved: the branch is pushed and the pull request opened.' : 'Rejected.';
  });
  const o = order.data;
  return (
    <Page title={o ? (o.title ?? 'Work order') : 'Work order'} intro={o ? <code>{o.id}</code> : undefined}>
      <ErrorNotice error={order.error} />
      {!o && order.loading && <Loading what="the work order" />}
      {o && (
        <>
          <Section title="Decision">
            <p data-testid="work-order-status">
              <Status value={o.status} />{' '}
              {o.decision && (
                <>
                  certification <Status value={o.decision.certification} />
                </>
              )}
            </p>
            {o.decision && (
              <ul>
                {o.decision.reasons.map((r) => (
                  <li key={r}>{r}</li>
                ))}
              </ul>
            )}
            {o.failure_reason && <p class="error">{o.failure_reason}</p>}
            <p class="muted small">
              {o.repository_url}: {o.base_branch} → {o.work_branch}, preset {o.policy_preset}, trust tier {o.trust_tier}
              ; rollback point <code>{o.rollback_point ? short(o.rollback_point, 12) : '—'}</code>
              {o.pr_url && (
                <>
                  ; pull request <a href={o.pr_url}>{o.pr_url}</a>
                </>
              )}
              {o.rollback && <>; rolled back ({o.rollback.outcome})</>}
            </p>
            {['certified', 'needs_review'].includes(o.status) && (
              <p>
                <Button busy={act.busy} onClick={() => void act.run('approve')}>
                  Approve
                </Button>{' '}
                <Button variant="danger" busy={act.busy} onClick={() => void act.run('reject')}>
                  Reject
                </Button>
              </p>
            )}
            <ErrorNotice error={act.error} />
            <Done message={act.done} />
            {o.approvals.length > 0 && (
              <DataTable caption="Approvals" columns={['Decision', 'By', 'Why', 'When']}>
                {o.approvals.map((a) => (
                  <tr key={a.at}>
                    <td>{a.decision}</td>
                    <td>
                      {a.by} ({a.role})
                    </td>
                    <td>{a.reason ?? '—'}</td>
                    <td>{when(a.at)}</td>
                  </tr>
                ))}
              </DataTable>
            )}
          </Section>
          <Section title="Checks">
            {o.checks.length === 0 ? (
              <Empty>No checks ran.</Empty>
            ) : (
              <DataTable
                caption="Checks the node ran"
                columns={['Command', { label: 'Exit', numeric: true }, 'Output SHA-256']}
              >
                {o.checks.map((c) => (
                  <tr key={c.command}>
                    <td>
                      <code>{c.command}</code>
                    </td>
                    <td class="num">{c.exit_code ?? '—'}</td>
                    <td>
                      <code>{short(c.output_sha256, 16)}</code>
                    </td>
                  </tr>
                ))}
              </DataTable>
            )}
          </Section>
          <Section title={`Diff (${o.changed_paths.length} paths)`}>
            <ErrorNotice error={diff.error} />
            {diff.data &&
              (diff.data.diff ? (
                <pre class="diff" data-testid="work-order-diff">
                  {diff.data.diff}
                </pre>
              ) : (
                <Empty>No change.</Empty>
              ))}
            {diff.data?.diff_truncated && <p class="muted small">The diff was cut at 1 MiB.</p>}
          </Section>
          <EvidenceSection jobId={o.id} status={o.status} bundlePath={`/api/v1/work/orders/${o.id}/evidence/bundle`} />
        </>
      )}
    </Page>
  );
}
