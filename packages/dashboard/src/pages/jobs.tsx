import { JOB_STATUSES } from '@svc/protocol/rest';
import { useState } from 'preact/hooks';
import { api } from '../api';
import { DataTable, Empty, ErrorNotice, Loading, Page, Pager, Section, Status } from '../components/ui';
import { money, short, when } from '../format';
import { useAsync } from '../hooks';
import { Link, navigate, useLocation } from '../router';
import type { Job } from '../types';

const PAGE = 25;

/** Jobs as a table; `compact` keeps the columns that fit beside another panel. */
export function JobTable(props: { jobs: Job[]; caption: string; compact?: boolean }) {
  return (
    <DataTable
      caption={props.caption}
      testId="jobs"
      columns={
        props.compact
          ? ['Job', 'Type', 'Status', { label: 'Charged', numeric: true }]
          : [
              'Job',
              'Type',
              'Status',
              { label: 'Budget', numeric: true },
              { label: 'Charged', numeric: true },
              'Submitted',
            ]
      }
    >
      {props.jobs.map((j) => (
        <tr key={j.id}>
          <td>
            <Link href={`/jobs/${j.id}`}>
              <code>{short(j.id, 8)}</code>
            </Link>
          </td>
          <td>
            {j.job_type}
            {j.model && <span class="muted small"> {j.model}</span>}
          </td>
          <td>
            <Status value={j.status} />
          </td>
          {!props.compact && <td class="num">{money(j.budget_cents)}</td>}
          <td class="num">{j.charged_cents === null ? '—' : money(j.charged_cents)}</td>
          {!props.compact && <td>{when(j.submitted_at)}</td>}
        </tr>
      ))}
    </DataTable>
  );
}

export function JobsPage() {
  const location = useLocation();
  const status = location.query.get('status') ?? '';
  const [offset, setOffset] = useState(0);
  const jobs = useAsync(
    (signal) =>
      api<{ jobs: Job[]; total: number }>('/api/v1/marketplace/jobs', {
        query: { limit: PAGE, offset, status: status || undefined },
        signal,
      }),
    [offset, status],
    { pollMs: 5000 },
  );
  const setStatus = (value: string) => {
    setOffset(0);
    navigate(value ? `/jobs?status=${value}` : '/jobs', { replace: true });
  };
  return (
    <Page
      title="Jobs"
      intro="Marketplace jobs of your organization, newest first. Submit them with the API (POST /api/v1/marketplace/jobs)."
    >
      <Section title={status ? `Jobs: ${status}` : 'All jobs'}>
        <fieldset class="filters">
          <legend>Status</legend>
          {['', ...JOB_STATUSES].map((s) => (
            <label key={s || 'all'} class="chip">
              <input type="radio" name="status" value={s} checked={status === s} onChange={() => setStatus(s)} />
              {s || 'all'}
            </label>
          ))}
        </fieldset>
        <ErrorNotice error={jobs.error} />
        {jobs.loading && !jobs.data && <Loading what="jobs" />}
        {jobs.data && jobs.data.jobs.length === 0 && <Empty>{status ? `No ${status} jobs.` : 'No jobs yet.'}</Empty>}
        {jobs.data && jobs.data.jobs.length > 0 && (
          <>
            <JobTable jobs={jobs.data.jobs} caption={status ? `${status} jobs` : 'Jobs'} />
            <Pager
              offset={offset}
              limit={PAGE}
              total={jobs.data.total}
              shown={jobs.data.jobs.length}
              onChange={setOffset}
              what="Jobs"
            />
          </>
        )}
      </Section>
    </Page>
  );
}
