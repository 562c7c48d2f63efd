import { useState } from 'preact/hooks';
import { api } from '../api';
import { useSession } from '../session-context';
import { Button, CopyButton, DataTable, Done, ErrorNotice, Field, Loading, Page, Section } from '../components/ui';
import { when } from '../format';
import { text, useAction, useAsync, useFormAction } from '../hooks';
import type { InviteResponse, Member, Role } from '../types';

/** What the API lets a role do to a member (docs/authentication.md, Organizations). */
export function allowedActions(
  me: { role: Role; buyerId: string },
  target: Member,
): { roles: Role[]; canRemove: boolean } {
  if (me.role === 'member') return { roles: [], canRemove: false };
  const touchesOwner = target.role === 'owner';
  if (me.role === 'admin' && touchesOwner) return { roles: [], canRemove: false };
  const roles: Role[] = me.role === 'owner' ? ['owner', 'admin', 'member'] : ['admin', 'member'];
  return { roles, canRemove: true };
}

function Invite(props: { onInvited: () => void }) {
  const [invite, setInvite] = useState<InviteResponse | undefined>(undefined);
  const action = useFormAction(async (data, form) => {
    const body = await api<InviteResponse>('/api/v1/organizations/current/invites', {
      body: { email: text(data, 'email'), role: text(data, 'role') },
    });
    setInvite(body);
    form.reset();
    props.onInvited();
  });
  return (
    <Section title="Invite someone">
      <form class="row-form" onSubmit={action.onSubmit}>
        <Field label="Email">{(id) => <input id={id} name="email" type="email" required />}</Field>
        <Field label="Role">
          {(id) => (
            <select id={id} name="role">
              <option value="member">member: uses the API</option>
              <option value="admin">admin: manages members and keys</option>
            </select>
          )}
        </Field>
        <Button type="submit" variant="primary" busy={action.busy}>
          Create invite
        </Button>
      </form>
      <ErrorNotice error={action.error} prefix="Could not invite" />
      {invite && (
        <div class="secret" role="region" aria-label="Invite link" data-testid="invite">
          <p>
            Send this link to <strong>{invite.email}</strong> ({invite.role}). It works once, until{' '}
            {when(invite.expires_at)}.
          </p>
          <code class="key" data-testid="accept-url">
            {invite.accept_url}
          </code>
          <CopyButton text={invite.accept_url} label="Copy the invite link" />
        </div>
      )}
    </Section>
  );
}

function MemberRow(props: {
  member: Member;
  me: { role: Role; buyerId: string };
  onChanged: (message: string) => void;
}) {
  const m = props.member;
  const allowed = allowedActions(props.me, m);
  const [role, setRole] = useState<Role>(m.role);
  const [confirming, setConfirming] = useState(false);
  const save = useAction(async () => {
    await api(`/api/v1/organizations/current/members/${m.buyer_id}`, { method: 'PATCH', body: { role } });
    props.onChanged(`${m.email} is now ${role}.`);
  });
  const remove = useAction(async () => {
    await api(`/api/v1/organizations/current/members/${m.buyer_id}`, { method: 'DELETE' });
    props.onChanged(`${m.email} was removed; their keys here are revoked.`);
  });
  const self = m.buyer_id === props.me.buyerId;
  return (
    <tr data-member={m.email}>
      <td>
        {m.name || m.email}
        {self && <span class="muted small"> (you)</span>}
      </td>
      <td>{m.email}</td>
      <td>
        {allowed.roles.length > 0 ? (
          <span class="inline-form">
            <label class="sr-only" for={`role-${m.buyer_id}`}>
              Role of {m.email}
            </label>
            <select id={`role-${m.buyer_id}`} value={role} onChange={(e) => setRole(e.currentTarget.value as Role)}>
              {(allowed.roles.includes(m.role) ? allowed.roles : [m.role, ...allowed.roles]).map((r) => (
                <option key={r} value={r}>
                  {r}
                </option>
              ))}
            </select>
            <Button onClick={() => void save.run()} disabled={role === m.role} busy={save.busy}>
              Save role
            </Button>
          </span>
        ) : (
          m.role
        )}
      </td>
      <td>{when(m.created_at)}</td>
      <td>
        {allowed.canRemove &&
          (confirming ? (
            <span class="inline-form">
              <Button variant="danger" onClick={() => void remove.run()} busy={remove.busy}>
                Remove {self ? 'myself' : m.email}
              </Button>
              <Button onClick={() => setConfirming(false)}>Cancel</Button>
            </span>
          ) : (
            <Button variant="danger" onClick={() => setConfirming(true)} aria-label={`Remove ${m.email}…`}>
              Remove…
            </Button>
          ))}
        <ErrorNotice error={save.error ?? remove.error} />
      </td>
    </tr>
  );
}

export function OrganizationPage() {
  const { session } = useSession();
  const data = useAsync(
    (signal) =>
      api<{ organization: { id: string; name: string; created_at: string }; members: Member[] }>(
        '/api/v1/organizations/current/members',
        { signal },
      ),
    [],
  );
  const [message, setMessage] = useState<string | undefined>(undefined);
  const me = { role: session.organization.role, buyerId: session.buyerId };
  const manager = me.role !== 'member';
  return (
    <Page
      title="Organization"
      intro={
        data.data
          ? `${data.data.organization.name}: credits, jobs and keys belong to the organization. You are ${me.role === 'admin' ? 'an' : 'a'} ${me.role}.`
          : undefined
      }
    >
      {manager && <Invite onInvited={data.reload} />}
      <Section title="Members">
        {!manager && <p class="muted">Owners and admins manage members; ask one of them to change roles.</p>}
        <Done message={message} />
        <ErrorNotice error={data.error} />
        {data.loading && !data.data && <Loading what="members" />}
        {data.data && (
          <DataTable
            caption={`Members of ${data.data.organization.name}`}
            columns={['Name', 'Email', 'Role', 'Joined', { label: 'Actions', srOnly: true }]}
          >
            {data.data.members.map((m) => (
              <MemberRow
                key={`${m.buyer_id}-${m.role}`}
                member={m}
                me={me}
                onChanged={(text) => {
                  setMessage(text);
                  data.reload();
                }}
              />
            ))}
          </DataTable>
        )}
      </Section>
    </Page>
  );
}
