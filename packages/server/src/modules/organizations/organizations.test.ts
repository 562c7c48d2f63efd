import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createKey, createTestApp, signUp, type TestApp, type TestBuyer } from '../../../test/harness.js';

describe('organizations', () => {
  let t: TestApp;
  let owner: TestBuyer;
  let outsider: TestBuyer;
  beforeAll(async () => {
    t = await createTestApp({ env: { SVC_PUBLIC_URL: 'https://svc.example.test' } });
    owner = await signUp(t.app, { name: 'Olive' });
    outsider = await signUp(t.app);
  });
  afterAll(() => t.close());

  async function inviteAndAccept(
    by: TestBuyer,
    email: string,
    role: 'admin' | 'member',
    password = 'member password 1',
  ) {
    const inv = await t.app.inject({
      method: 'POST',
      url: '/api/v1/organizations/current/invites',
      headers: bearer(by.token),
      payload: { email, role },
    });
    expect(inv.statusCode).toBe(201);
    const acc = await t.app.inject({
      method: 'POST',
      url: '/api/v1/organizations/invites/accept',
      payload: { token: inv.json().invite_token, password, name: email.split('@')[0] },
    });
    expect(acc.statusCode).toBe(200);
    return { invite: inv.json(), auth: acc.json() };
  }

  it('invites with a single-use, 7-day token and an accept_url on the public URL; accepting creates the account', async () => {
    const { invite, auth } = await inviteAndAccept(owner, 'Mia@Example.test', 'member');
    expect(invite.accept_url).toBe(`https://svc.example.test/invite?token=${encodeURIComponent(invite.invite_token)}`);
    expect(Date.parse(invite.expires_at) - Date.now()).toBeGreaterThan(6.9 * 86_400_000);
    expect(auth.organization).toMatchObject({ id: owner.orgId, role: 'member' });
    const members = (
      await t.app.inject({ method: 'GET', url: '/api/v1/organizations/current/members', headers: bearer(auth.token) })
    ).json();
    expect(members.members.map((m: { email: string; role: string }) => `${m.email}:${m.role}`)).toEqual([
      `${owner.email}:owner`,
      'mia@example.test:member',
    ]);
    const reuse = await t.app.inject({
      method: 'POST',
      url: '/api/v1/organizations/invites/accept',
      payload: { token: invite.invite_token, password: 'member password 1' },
    });
    expect(reuse.statusCode).toBe(404);
  });

  it('an existing account joins with its own password, not another', async () => {
    const existing = await signUp(t.app);
    const inv = (
      await t.app.inject({
        method: 'POST',
        url: '/api/v1/organizations/current/invites',
        headers: bearer(owner.token),
        payload: { email: existing.email },
      })
    ).json();
    const wrong = await t.app.inject({
      method: 'POST',
      url: '/api/v1/organizations/invites/accept',
      payload: { token: inv.invite_token, password: 'not my password at all' },
    });
    expect(wrong.statusCode).toBe(401);
    const ok = await t.app.inject({
      method: 'POST',
      url: '/api/v1/organizations/invites/accept',
      payload: { token: inv.invite_token, password: existing.password },
    });
    expect(ok.json().organization).toMatchObject({ id: owner.orgId, role: 'member' });
  });

  it('an expired invite is refused', async () => {
    const inv = (
      await t.app.inject({
        method: 'POST',
        url: '/api/v1/organizations/current/invites',
        headers: bearer(owner.token),
        payload: { email: 'late@example.test' },
      })
    ).json();
    await t.ctx.db.query(
      "UPDATE invites SET expires_at = now() - interval '1 minute' WHERE email = 'late@example.test'",
    );
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/organizations/invites/accept',
      payload: { token: inv.invite_token, password: 'long enough pass' },
    });
    expect(res.statusCode).toBe(404);
  });

  it('members use the API but cannot manage; admins manage but cannot touch owners', async () => {
    const member = (await inviteAndAccept(owner, 'mem2@example.test', 'member')).auth;
    const admin = (await inviteAndAccept(owner, 'adm@example.test', 'admin')).auth;
    const denied = await t.app.inject({
      method: 'POST',
      url: '/api/v1/organizations/current/invites',
      headers: bearer(member.token),
      payload: { email: 'x@example.test' },
    });
    expect(denied.statusCode).toBe(403);
    expect(denied.json().error).toBe('forbidden');
    const promote = await t.app.inject({
      method: 'PATCH',
      url: `/api/v1/organizations/current/members/${member.buyer_id}`,
      headers: bearer(admin.token),
      payload: { role: 'admin' },
    });
    expect(promote.json().member).toMatchObject({ buyer_id: member.buyer_id, role: 'admin' });
    const toOwner = await t.app.inject({
      method: 'PATCH',
      url: `/api/v1/organizations/current/members/${member.buyer_id}`,
      headers: bearer(admin.token),
      payload: { role: 'owner' },
    });
    expect(toOwner.statusCode).toBe(403);
    const demoteOwner = await t.app.inject({
      method: 'PATCH',
      url: `/api/v1/organizations/current/members/${owner.buyerId}`,
      headers: bearer(admin.token),
      payload: { role: 'member' },
    });
    expect(demoteOwner.statusCode).toBe(403);
  });

  it('the last owner can be neither demoted nor removed', async () => {
    const demote = await t.app.inject({
      method: 'PATCH',
      url: `/api/v1/organizations/current/members/${owner.buyerId}`,
      headers: bearer(owner.token),
      payload: { role: 'admin' },
    });
    expect(demote.statusCode).toBe(409);
    const remove = await t.app.inject({
      method: 'DELETE',
      url: `/api/v1/organizations/current/members/${owner.buyerId}`,
      headers: bearer(owner.token),
    });
    expect(remove.statusCode).toBe(409);
  });

  it('removing a member ends their sessions and revokes the keys they made here', async () => {
    const { auth } = await inviteAndAccept(owner, 'leaver@example.test', 'member');
    const key = await createKey(t.app, { ...owner, apiKey: auth.token, token: auth.token, buyerId: auth.buyer_id }, [
      'buyer',
    ]);
    expect(
      (await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(key) })).json().organization.id,
    ).toBe(owner.orgId);
    const res = await t.app.inject({
      method: 'DELETE',
      url: `/api/v1/organizations/current/members/${auth.buyer_id}`,
      headers: bearer(owner.apiKey),
    });
    expect(res.statusCode).toBe(200);
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(key) })).statusCode).toBe(401);
    expect(
      (await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(auth.token) })).statusCode,
    ).toBe(401);
  });

  it("another organization's members are invisible: 404 on change and remove, absent from lists", async () => {
    const patch = await t.app.inject({
      method: 'PATCH',
      url: `/api/v1/organizations/current/members/${owner.buyerId}`,
      headers: bearer(outsider.apiKey),
      payload: { role: 'member' },
    });
    expect(patch.statusCode).toBe(404);
    const del = await t.app.inject({
      method: 'DELETE',
      url: `/api/v1/organizations/current/members/${owner.buyerId}`,
      headers: bearer(outsider.apiKey),
    });
    expect(del.statusCode).toBe(404);
    const list = (
      await t.app.inject({
        method: 'GET',
        url: '/api/v1/organizations/current/members',
        headers: bearer(outsider.apiKey),
      })
    ).json();
    expect(list.members.map((m: { buyer_id: string }) => m.buyer_id)).toEqual([outsider.buyerId]);
    const current = (
      await t.app.inject({ method: 'GET', url: '/api/v1/organizations/current', headers: bearer(outsider.apiKey) })
    ).json();
    expect(current.organization.id).toBe(outsider.orgId);
  });
});
