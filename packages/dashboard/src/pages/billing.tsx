import { useEffect, useState } from 'preact/hooks';
import { api, request, saveBlob } from '../api';
import { SpendChart } from '../components/spend-chart';
import { Button, DataTable, ErrorNotice, Field, Loading, Page, Pager, Section, Stat, Status } from '../components/ui';
import { money, signedMoney, when } from '../format';
import { text, useAction, useAsync, useFormAction } from '../hooks';
import { Link, useLocation } from '../router';
import type { Balance, Topup, Transaction } from '../types';
import { NoRealMoney } from './payouts';

const PAGE = 25;
/** The API's largest page; the export walks the whole ledger with it. */
const EXPORT_PAGE = 200;

/** Every row of the ledger as one CSV file: the pages' CSV joined under one header row. */
export function joinCsvPages(pages: string[]): string {
  const [first = '', ...rest] = pages;
  const body = rest.map((p) => p.slice(p.indexOf('\r\n') + 2)).filter(Boolean);
  return [first, ...body].join('');
}

async function exportLedger(total: number): Promise<string> {
  const pages: string[] = [];
  for (let offset = 0; offset < Math.max(total, 1); offset += EXPORT_PAGE) {
    const res = await request('/api/v1/billing/transactions', { query: { format: 'csv', limit: EXPORT_PAGE, offset } });
    pages.push(await res.text());
  }
  const csv = joinCsvPages(pages);
  saveBlob(new Blob([csv], { type: 'text/csv' }), `svc-ledger-${new Date().toISOString().slice(0, 10)}.csv`);
  return `Exported ${total} ledger rows.`;
}

export function BalanceStats() {
  const balance = useAsync((signal) => api<Balance>('/api/v1/billing/balance', { signal }), []);
  if (balance.error) return <ErrorNotice error={balance.error} prefix="Balance" />;
  if (!balance.data) return <Loading what="the balance" />;
  const b = balance.data;
  return (
    <dl class="stats" data-testid="balance">
      <Stat label="Balance" value={money(b.balance_cents)} />
      <Stat
        label="Available"
        value={money(b.available_cents)}
        note={b.debt_cents > 0 ? 'balance less holds and debt' : 'balance less holds'}
      />
      <Stat label="Held by running jobs" value={money(b.held_cents)} />
      {b.debt_cents > 0 && (
        <Stat label="Owed" value={money(b.debt_cents)} note="a reversed earning; paid first from your next credits" />
      )}
      <Stat
        label="Free-tier grant"
        value={money(b.free_tier_granted_cents)}
        note={b.free_tier_granted_cents > 0 ? 'granted at sign-up' : 'none'}
      />
    </dl>
  );
}

/** Buys credit: the provider's checkout page, then back here with `?topup=<id>` until the credit lands. */
function TopUp(props: { onLanded: () => void }) {
  const returned = useLocation().query.get('topup');
  const start = useFormAction(async (data) => {
    const cents = Math.round(Number(text(data, 'amount')) * 100);
    if (!Number.isSafeInteger(cents) || cents <= 0) throw new Error('Enter an amount in CAD, e.g. 25.');
    const topup = await api<Topup>('/api/v1/billing/topups', { body: { amount_cents: cents } });
    window.location.assign(topup.checkout_url);
  });
  const [pending, setPending] = useState(true);
  const current = useAsync(
    (signal) =>
      returned
        ? api<Topup>(`/api/v1/billing/topups/${encodeURIComponent(returned)}`, { signal })
        : Promise.resolve(undefined),
    [returned],
    { pollMs: returned && pending ? 1_500 : undefined },
  );
  const status = current.data?.status;
  const { onLanded } = props;
  useEffect(() => {
    // Once: when the top-up this page returned to leaves `pending`.
    if (!status || status === 'pending' || !pending) return;
    setPending(false);
    if (status === 'paid') onLanded();
  }, [status, pending, onLanded]);
  return (
    <>
      {current.data && (
        <div data-testid="topup-status">
          <NoRealMoney provider={current.data.provider} movesRealMoney={current.data.provider !== 'local'} />
          <p role="status">
            Top-up of {money(current.data.amount_cents)}: <Status value={current.data.status} />
            {current.data.status === 'pending' && ' waiting for the payment provider to confirm…'}
            {current.data.status === 'paid' && ' the credit is on your balance.'}
            {current.data.failure_reason && <span class="muted small"> {current.data.failure_reason}</span>}
          </p>
        </div>
      )}
      <ErrorNotice error={current.error} prefix="Top-up" />
      <form class="inline-form" onSubmit={start.onSubmit}>
        <Field
          label="Amount (CAD)"
          hint="You pay on the payment provider's checkout page; the credit is added once it confirms."
        >
          {(id, hint) => (
            <input
              id={id}
              name="amount"
              type="number"
              min="5"
              max="10000"
              step="0.01"
              required
              aria-describedby={hint}
            />
          )}
        </Field>
        <ErrorNotice error={start.error} prefix="Could not start the top-up" />
        <Button type="submit" variant="primary" busy={start.busy}>
          Top up
        </Button>
      </form>
    </>
  );
}

export function BillingPage() {
  const [offset, setOffset] = useState(0);
  const [landed, setLanded] = useState(0);
  const ledger = useAsync(
    (signal) =>
      api<{ transactions: Transaction[]; total: number }>('/api/v1/billing/transactions', {
        query: { limit: PAGE, offset },
        signal,
      }),
    [offset, landed],
  );
  const exporting = useAction(() => exportLedger(ledger.data?.total ?? 0));
  const rows = ledger.data?.transactions ?? [];
  return (
    <Page
      title="Billing"
      intro="Prices are in Canadian dollars. A job holds its budget while it runs and is charged for what it used."
    >
      <Section title="Balance">
        <BalanceStats key={landed} />
      </Section>
      <Section title="Top up">
        <TopUp onLanded={() => setLanded((n) => n + 1)} />
      </Section>
      <Section title="Spend">
        <SpendChart days={30} />
      </Section>
      <Section
        title="Ledger"
        actions={
          <Button onClick={() => void exporting.run()} busy={exporting.busy} disabled={!ledger.data}>
            Export CSV
          </Button>
        }
      >
        <p role="status" class="muted small">
          {exporting.done}
        </p>
        <ErrorNotice error={exporting.error ?? ledger.error} />
        {ledger.loading && !ledger.data && <Loading what="the ledger" />}
        {ledger.data && (
          <>
            <DataTable
              caption="Ledger rows, newest first"
              testId="ledger"
              columns={[
                'When',
                'Type',
                'Description',
                { label: 'Amount', numeric: true },
                { label: 'Balance after', numeric: true },
              ]}
            >
              {rows.map((t) => (
                <tr key={t.id}>
                  <td>{when(t.created_at)}</td>
                  <td>
                    <code>{t.tx_type}</code>
                  </td>
                  <td>
                    {t.description}
                    {t.ref?.startsWith('job_') && (
                      <>
                        {' '}
                        <Link href={`/jobs/${t.ref}`}>job</Link>
                      </>
                    )}
                  </td>
                  <td class={`num ${t.amount_cents < 0 ? 'neg' : 'pos'}`}>{signedMoney(t.amount_cents)}</td>
                  <td class="num">{money(t.balance_after)}</td>
                </tr>
              ))}
            </DataTable>
            <Pager
              offset={offset}
              limit={PAGE}
              total={ledger.data.total}
              shown={rows.length}
              onChange={setOffset}
              what="Ledger"
            />
          </>
        )}
      </Section>
    </Page>
  );
}
