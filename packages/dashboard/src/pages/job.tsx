import { useEffect, useState } from 'preact/hooks';
import { api, request, saveBlob } from '../api';
import { Button, Done, Empty, ErrorNotice, Loading, Page, Section, Status } from '../components/ui';
import { duration, money, short, signedMoney, when } from '../format';
import { useAction, useAsync } from '../hooks';
import { Link } from '../router';
import type { Job, JobAudit, Receipt } from '../types';
import { EvidenceSection } from './evidence';

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

/** `job_lease_lost` -> `Lease lost`. */
export function eventLabel(type: string): string {
  const words = type.replace(/^job_/, '').replace(/[._]/g, ' ');
  return words.charAt(0).toUpperCase() + words.slice(1);
}

function detailText(details: Record<string, unknown>): string {
  return Object.entries(details)
    .filter(([, v]) => v !== null && v !== undefined && v !== '')
    .map(([k, v]) => `${k.replace(/_/g, ' ')}: ${typeof v === 'object' ? JSON.stringify(v) : String(v)}`)
    .join(' · ');
}

function Timeline(props: { audit: JobAudit }) {
  const events = [...props.audit.events].sort((a, b) => a.at.localeCompare(b.at));
  const start = events[0] ? new Date(events[0].at).getTime() : 0;
  if (events.length === 0) return <Empty>No events yet.</Empty>;
  return (
    <ol class="timeline" data-testid="timeline">
      {events.map((e, i) => (
        <li key={`${e.type}-${i}`} data-event={e.type}>
          <span class="dot" aria-hidden="true" />
          <div>
            <strong>{eventLabel(e.type)}</strong>{' '}
            <time dateTime={e.at} class="muted small">
              {when(e.at)}
              {i > 0 && ` (+${duration(new Date(e.at).getTime() - start)})`}
            </time>
            {Object.keys(e.details).length > 0 && <p class="small muted wrap">{detailText(e.details)}</p>}
          </div>
        </li>
      ))}
    </ol>
  );
}

function Receipts(props: { receipts: Receipt[] }) {
  if (props.receipts.length === 0)
    return <Empty>No receipt yet: the node signs one when it delivers the result.</Empty>;
  return (
    <ul class="receipts" data-testid="receipts">
      {props.receipts.map((r) => (
        <li key={r.id} class="receipt">
          <dl class="kv">
            <dt>Receipt</dt>
            <dd>
              <code>{r.id}</code> <span class="badge info">{r.signature_version}</span>
            </dd>
            <dt>Node</dt>
            <dd>
              <code>{r.node_id}</code>
              {typeof r.metadata.country === 'string' && ` in ${r.metadata.country}`}
              {typeof r.metadata.gpu_model === 'string' && r.metadata.gpu_model && ` · ${r.metadata.gpu_model}`}
            </dd>
            <dt>Node public key</dt>
            <dd>
              <code title={r.node_public_key}>{short(r.node_public_key, 16)}</code>
            </dd>
            <dt>Result hash</dt>
            <dd>
              <code title={r.result_hash}>{short(r.result_hash, 16)}</code>
            </dd>
            <dt>Metering units</dt>
            <dd>{r.metering_units}</dd>
            <dt>Signature (Ed25519)</dt>
            <dd>
              <code title={r.signature}>{short(r.signature, 16)}</code>
            </dd>
            <dt>Signed at</dt>
            <dd>{when(r.created_at)}</dd>
          </dl>
        </li>
      ))}
    </ul>
  );
}

export function JobPage(props: { id: string }) {
  // Follow the job while it runs; stop asking once it has finished.
  const [live, setLive] = useState(true);
  const job = useAsync((signal) => api<Job>(`/api/v1/marketplace/jobs/${props.id}`, { signal }), [props.id], {
    pollMs: live ? 2000 : undefined,
  });
  const finished = job.data ? TERMINAL.has(job.data.status) : false;
  useEffect(() => setLive(!finished), [finished]);
  const audit = useAsync(
    (signal) => api<JobAudit>(`/api/v1/marketplace/jobs/${props.id}/audit`, { signal }),
    [props.id, job.data?.status],
  );
  const receipts = useAsync(
    (signal) => api<{ receipts: Receipt[] }>(`/api/v1/jobs/${props.id}/receipts`, { signal }),
    [props.id, job.data?.status],
  );
  const download = useAction(async () => {
    const res = await request(`/api/v1/marketplace/jobs/${props.id}/result`);
    const name = /filename="([^"]+)"/.exec(res.headers.get('content-disposition') ?? '')?.[1] ?? `${props.id}-result`;
    saveBlob(await res.blob(), name);
  });
  const cancel = useAction(async () => {
    await api(`/api/v1/marketplace/jobs/${props.id}/cancel`, { method: 'POST' });
    job.reload();
    return 'Cancelled: the hold is released.';
  });
  const j = job.data;
  return (
    <Page title={`Job ${short(props.id, 8)}`} intro={<Link href="/jobs">All jobs</Link>}>
      <ErrorNotice error={job.error} />
      {!j && job.loading && <Loading what="the job" />}
      {j && (
        <>
          <Section
            title="Summary"
            actions={
              <span class="actions">
                {j.status === 'completed' && (
                  <Button onClick={() => void download.run()} busy={download.busy}>
                    Download result
                  </Button>
                )}
                {!finished && (
                  <Button variant="danger" onClick={() => void cancel.run()} busy={cancel.busy}>
                    Cancel job
                  </Button>
                )}
              </span>
            }
          >
            <Done message={cancel.done} />
            <ErrorNotice error={download.error ?? cancel.error} />
            <dl class="kv" data-testid="job-summary">
              <dt>Id</dt>
              <dd>
                <code>{j.id}</code>
              </dd>
              <dt>Status</dt>
              <dd>
                <Status value={j.status} />
                {j.failure_reason && <span class="small"> {j.failure_reason}</span>}
              </dd>
              <dt>Type</dt>
              <dd>
                {j.job_type} (kind {j.kind}){j.model && ` · ${j.model}`}
              </dd>
              <dt>Pool</dt>
              <dd>{j.execution_pool}</dd>
              <dt>Jurisdiction</dt>
              <dd>{j.strict_jurisdiction || 'any'}</dd>
              <dt>Node</dt>
              <dd>{j.node_id ? <code>{j.node_id}</code> : 'not assigned yet'}</dd>
              <dt>Attempts</dt>
              <dd>{j.attempts}</dd>
              <dt>Budget</dt>
              <dd>
                {money(j.budget_cents)} <span class="muted small">(estimate {money(j.estimated_cost_cents)})</span>
              </dd>
              <dt>Charged</dt>
              <dd>{j.charged_cents === null ? '—' : money(j.charged_cents)}</dd>
              <dt>Result hash</dt>
              <dd>{j.result_hash ? <code class="wrap">{j.result_hash}</code> : '—'}</dd>
              <dt>Policy</dt>
              <dd>{j.policy_note}</dd>
            </dl>
          </Section>
          <Section title="Timeline">
            <ErrorNotice error={audit.error} />
            {audit.data ? <Timeline audit={audit.data} /> : <Loading what="the timeline" />}
          </Section>
          <Section title="Receipts">
            <ErrorNotice error={receipts.error} />
            {receipts.data ? <Receipts receipts={receipts.data.receipts} /> : <Loading what="receipts" />}
          </Section>
          <EvidenceSection jobId={j.id} status={j.status} />
          {audit.data && audit.data.credit_ledger.length > 0 && (
            <Section title="Ledger rows">
              <ul>
                {audit.data.credit_ledger.map((t) => (
                  <li key={t.id}>
                    <code>{t.tx_type}</code> {signedMoney(t.amount_cents)} · {t.description} · {when(t.created_at)}
                  </li>
                ))}
              </ul>
            </Section>
          )}
        </>
      )}
    </Page>
  );
}
