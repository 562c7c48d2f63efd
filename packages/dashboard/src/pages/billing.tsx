import { useState } from 'preact/hooks';
import { api, request, saveBlob } from '../api';
import { SpendChart } from '../components/spend-chart';
import { Button, DataTable, ErrorNotice, Loading, Page, Pager, Section, Stat } from '../components/ui';
import { money, signedMoney, when } from '../format';
import { useAction, useAsync } from '../hooks';
import { Link } from '../router';
import type { Balance, Transaction } from '../types';

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
      <Stat label="Available" value={money(b.available_cents)} note="balance less holds" />
      <Stat label="Held by running jobs" value={money(b.held_cents)} />
      <Stat label="Free-tier grant" value={money(b.free_tier_granted_cents)} note={b.free_tier_granted_cents > 0 ? 'granted at sign-up' : 'none'} />
    </dl>
  );
}

export function BillingPage() {
  const [offset, setOffset] = useState(0);
  const ledger = useAsync(
    (signal) => api<{ transactions: Transaction[]; total: number }>('/api/v1/billing/transactions', { query: { limit: PAGE, offset }, signal }),
    [offset],
  );
  const exporting = useAction(() => exportLedger(ledger.data?.total ?? 0));
  const rows = ledger.data?.transactions ?? [];
  return (
    <Page title="Billing" intro="Prices are in Canadian dollars. A job holds its budget while it runs and is charged for what it used.">
      <Section title="Balance">
        <BalanceStats />
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
              columns={['When', 'Type', 'Description', { label: 'Amount', numeric: true }, { label: 'Balance after', numeric: true }]}
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
            <Pager offset={offset} limit={PAGE} total={ledger.data.total} shown={rows.length} onChange={setOffset} what="Ledger" />
          </>
        )}
      </Section>
    </Page>
  );
}
