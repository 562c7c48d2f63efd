import { useState } from 'preact/hooks';
import { api } from '../api';
import {
  Button,
  CopyButton,
  DataTable,
  Done,
  Empty,
  ErrorNotice,
  Field,
  Loading,
  Page,
  Section,
  Status,
} from '../components/ui';
import { ago, when } from '../format';
import { text, useAsync, useFormAction } from '../hooks';
import type { ApiKeyRecord } from '../types';

/** The named scopes (docs/authentication.md); `resource[:read|write]` goes in the free field. */
const SCOPES = [
  { value: 'buyer', help: 'inference, jobs, billing, keys, organization' },
  { value: 'read-only', help: 'reads of jobs, receipts, evidence, billing' },
  { value: 'write-only', help: 'inference only, no account reads' },
  { value: 'operator', help: 'for a node agent: registration and payouts' },
];

function CreateKey(props: { onCreated: () => void }) {
  const [created, setCreated] = useState<{ api_key: string; key: ApiKeyRecord } | undefined>(undefined);
  const action = useFormAction(async (data, form) => {
    const extra = text(data, 'extra')
      .split(/[\s,]+/)
      .filter(Boolean);
    const scopes = [...data.getAll('scope').map(String), ...extra];
    if (scopes.length === 0) throw new Error('Choose at least one scope.');
    const body = await api<{ api_key: string; key: ApiKeyRecord }>('/api/v1/auth/api-keys', {
      body: { label: text(data, 'label'), scopes },
    });
    setCreated(body);
    form.reset();
    props.onCreated();
  });
  return (
    <Section title="Create a key">
      <form onSubmit={action.onSubmit}>
        <Field label="Label" hint="What it is for, e.g. “ci” or “laptop”.">
          {(id, hint) => <input id={id} name="label" maxLength={100} required aria-describedby={hint} />}
        </Field>
        <fieldset>
          <legend>Scopes</legend>
          {SCOPES.map((s, i) => (
            <label class="check" key={s.value}>
              <input type="checkbox" name="scope" value={s.value} defaultChecked={i === 0} /> <code>{s.value}</code>{' '}
              <span class="muted small">{s.help}</span>
            </label>
          ))}
          <Field label="Other scopes (optional)" hint="Space separated, e.g. jobs:read billing:read.">
            {(id, hint) => <input id={id} name="extra" aria-describedby={hint} />}
          </Field>
        </fieldset>
        <ErrorNotice error={action.error} prefix="Could not create the key" />
        <Button type="submit" variant="primary" busy={action.busy}>
          Create key
        </Button>
      </form>
      {created && (
        <div class="secret" role="region" aria-label="New API key" data-testid="new-key">
          <p>
            <strong>Copy the key “{created.key.label}” now: it is shown this once.</strong> Only its prefix is kept in
            clear.
          </p>
          <code class="key">{created.api_key}</code>
          <CopyButton text={created.api_key} label="Copy the new API key" />
          <Button onClick={() => setCreated(undefined)}>I have copied it</Button>
        </div>
      )}
    </Section>
  );
}

function RevokeForm(props: { record: ApiKeyRecord; onDone: (message: string) => void; onCancel: () => void }) {
  const action = useFormAction(async (data) => {
    await api(`/api/v1/auth/api-keys/${props.record.key_id}/revoke`, { body: { reason: text(data, 'reason') } });
    props.onDone(`Key ${props.record.prefix} revoked: it stops working at once.`);
  });
  return (
    <form class="inline-form" onSubmit={action.onSubmit}>
      <Field label={`Reason for revoking ${props.record.prefix}`}>
        {(id) => <input id={id} name="reason" required maxLength={500} autoFocus />}
      </Field>
      <ErrorNotice error={action.error} />
      <Button type="submit" variant="danger" busy={action.busy}>
        Revoke now
      </Button>
      <Button onClick={props.onCancel}>Cancel</Button>
    </form>
  );
}

export function KeysPage() {
  const keys = useAsync((signal) => api<{ keys: ApiKeyRecord[] }>('/api/v1/auth/api-keys', { signal }), []);
  const [revoking, setRevoking] = useState<string | undefined>(undefined);
  const [message, setMessage] = useState<string | undefined>(undefined);
  const list = keys.data?.keys ?? [];
  return (
    <Page
      title="API keys"
      intro="Keys call the API and the gateway for your organization. Revoked keys are refused at once, on every server."
    >
      <CreateKey onCreated={keys.reload} />
      <Section title="Keys">
        <Done message={message} />
        <ErrorNotice error={keys.error} />
        {keys.loading && !keys.data && <Loading what="keys" />}
        {keys.data && list.length === 0 && <Empty>No keys yet.</Empty>}
        {list.length > 0 && (
          <DataTable
            caption="API keys of the organization"
            columns={['Label', 'Prefix', 'Scopes', 'Created', 'Last used', 'State', { label: 'Actions', srOnly: true }]}
          >
            {list.map((k) => (
              <tr key={k.key_id} data-key-prefix={k.prefix}>
                <td>{k.label || <span class="muted">(no label)</span>}</td>
                <td>
                  <code>{k.prefix}</code>
                </td>
                <td>{k.scopes.join(', ')}</td>
                <td>{when(k.created_at)}</td>
                <td title={k.last_used_at ?? undefined}>{ago(k.last_used_at)}</td>
                <td>
                  {k.revoked_at ? (
                    <>
                      <Status value="revoked" /> <span class="small muted">{k.revoked_reason}</span>
                    </>
                  ) : (
                    <Status value="active" />
                  )}
                </td>
                <td>
                  {!k.revoked_at &&
                    (revoking === k.key_id ? (
                      <RevokeForm
                        record={k}
                        onCancel={() => setRevoking(undefined)}
                        onDone={(m) => {
                          setRevoking(undefined);
                          setMessage(m);
                          keys.reload();
                        }}
                      />
                    ) : (
                      <Button
                        variant="danger"
                        onClick={() => (setMessage(undefined), setRevoking(k.key_id))}
                        aria-label={`Revoke ${k.prefix}`}
                      >
                        Revoke…
                      </Button>
                    ))}
                </td>
              </tr>
            ))}
          </DataTable>
        )}
      </Section>
    </Page>
  );
}
