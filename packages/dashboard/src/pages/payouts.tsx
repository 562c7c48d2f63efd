import { useState } from 'preact/hooks';
import { api } from '../api';
import {
  Button,
  DataTable,
  Empty,
  ErrorNotice,
  Field,
  Loading,
  Page,
  Pager,
  Section,
  Stat,
  Status,
} from '../components/ui';
import { money, when } from '../format';
import { text, useAction, useAsync, useFormAction } from '../hooks';
import type { PayoutAccountStatus, PayoutList } from '../types';

const PAGE = 25;

/** Said on every payment page when the server's provider is the offline `local` one. */
export function NoRealMoney(props: { provider: string; movesRealMoney: boolean }) {
  if (props.movesRealMoney) return null;
  return (
    <p class="notice" role="note" data-testid="no-real-money">
      <strong>No real money moves:</strong> this server uses the <code>{props.provider}</code> payment provider, which
      stands in for a real one. Payouts are recorded and marked paid by an administrator who pays by hand. Top-ups are
      promotional credit (they buy compute; what they pay a node is never paid out) until an administrator confirms
      them.
    </p>
  );
}

function Onboarding(props: { status: PayoutAccountStatus; onChange: () => void }) {
  const { status } = props;
  const open = useAction(async () => {
    const { url } = await api<{ url: string }>('/api/v1/node/connect/onboarding', {
      body: { account_id: status.account_id },
    });
    window.location.assign(url);
  });
  const create = useFormAction(async (data) => {
    await api('/api/v1/node/connect', {
      body: { email: text(data, 'email'), country: text(data, 'country').toUpperCase() },
    });
    props.onChange();
    return 'Payout account created. Continue with onboarding.';
  });
  if (!status.account_id) {
    return (
      <form onSubmit={create.onSubmit} data-testid="payout-setup">
        <p>Set up a payout account to be paid what your nodes earn.</p>
        <Field label="Payout email">
          {(id) => <input id={id} name="email" type="email" required maxLength={254} />}
        </Field>
        <Field label="Country" hint="Two letters, e.g. CA.">
          {(id, hint) => (
            <input id={id} name="country" required pattern="[A-Za-z]{2}" maxLength={2} aria-describedby={hint} />
          )}
        </Field>
        <ErrorNotice error={create.error} prefix="Could not create the payout account" />
        <Button type="submit" variant="primary" busy={create.busy}>
          Set up payouts
        </Button>
      </form>
    );
  }
  return (
    <div data-testid="payout-account">
      <dl class="stats">
        <Stat label="Payout account" value={<code>{status.account_id}</code>} note={status.provider} />
        <Stat
          label="Onboarding"
          value={<Status value={status.onboarded ? 'onboarded' : 'pending'} />}
          note={status.onboarded ? 'payouts are sent to this account' : 'finish it to be paid'}
        />
      </dl>
      {!status.onboarded && (
        <>
          <ErrorNotice error={open.error} prefix="Could not open onboarding" />
          <Button variant="primary" busy={open.busy} onClick={() => void open.run()}>
            Continue onboarding
          </Button>
        </>
      )}
    </div>
  );
}

export function PayoutsPage() {
  const [offset, setOffset] = useState(0);
  const status = useAsync((signal) => api<PayoutAccountStatus>('/api/v1/node/connect/status', { signal }), []);
  const payouts = useAsync(
    (signal) => api<PayoutList>('/api/v1/payouts', { query: { limit: PAGE, offset }, signal }),
    [offset],
  );
  const list = payouts.data;
  return (
    <Page
      title="Payouts"
      intro="What your nodes earn, less the platform fee, is paid out when it reaches the minimum. Work paid with free-tier credit earns nothing payable."
    >
      {status.data && <NoRealMoney provider={status.data.provider} movesRealMoney={status.data.moves_real_money} />}
      <Section title="Payout account">
        <ErrorNotice error={status.error} />
        {status.data ? (
          <Onboarding status={status.data} onChange={status.reload} />
        ) : (
          !status.error && <Loading what="the payout account" />
        )}
      </Section>
      <Section title="Payable">
        <ErrorNotice error={payouts.error} />
        {list && (
          <dl class="stats" data-testid="payable">
            <Stat label="Payable now" value={money(list.payable_cents)} note="earnings not yet paid out" />
            <Stat label="Minimum payout" value={money(list.minimum_cents)} />
          </dl>
        )}
      </Section>
      <Section title="History">
        {payouts.loading && !list && <Loading what="the payouts" />}
        {list && list.payouts.length === 0 && <Empty>No payouts yet.</Empty>}
        {list && list.payouts.length > 0 && (
          <>
            <DataTable
              caption="Payouts, newest first"
              testId="payouts"
              columns={['When', 'Period', 'Status', { label: 'Amount', numeric: true }, 'Reference']}
            >
              {list.payouts.map((p) => (
                <tr key={p.id}>
                  <td>{when(p.created_at)}</td>
                  <td>
                    {when(p.period_start)} to {when(p.period_end)}
                  </td>
                  <td>
                    <Status value={p.status} />
                    {p.failure_reason && <span class="muted small"> {p.failure_reason}</span>}
                  </td>
                  <td class="num">{money(p.amount_cents)}</td>
                  <td>
                    <code>{p.provider_ref ?? '-'}</code>
                  </td>
                </tr>
              ))}
            </DataTable>
            <Pager
              offset={offset}
              limit={PAGE}
              total={list.total}
              shown={list.payouts.length}
              onChange={setOffset}
              what="Payouts"
            />
          </>
        )}
      </Section>
    </Page>
  );
}
