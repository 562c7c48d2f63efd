import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createKey, createTestApp, signUp, type TestApp, type TestBuyer } from '../../../test/harness.js';

/** The scopes of the table in DESIGN.md section 6, and the creators the probe escalated from. */
const NAMED = ['buyer', 'read-only', 'write-only', 'buyer:read', 'operator'];
const CREATORS = [...NAMED, 'keys', 'keys:write', 'buyer:write'];
/** creator -> the named scopes it may mint through the route (it needs keys:write to call it at all) */
const MINTABLE: Record<string, string[]> = {
  buyer: ['buyer', 'read-only', 'write-only', 'buyer:read'],
  'read-only': [],
  'write-only': [],
  'buyer:read': [],
  operator: [],
  keys: [],
  'keys:write': [],
  'buyer:write': [],
};

describe('minting keys: no credential grants more than it holds', () => {
  let t: TestApp;
  let owner: TestBuyer;
  beforeAll(async () => {
    t = await createTestApp();
    owner = await signUp(t.app);
  });
  afterAll(() => t.close());

  const mint = (credential: string, scopes: string[]) =>
    t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/api-keys',
      headers: bearer(credential),
      payload: { label: 'minted', scopes },
    });

  it('every pair (creator key scope x requested scope) of the scope table', async () => {
    const outcomes: string[] = [];
    const expected: string[] = [];
    for (const creator of CREATORS) {
      const key = await createKey(t.app, owner, [creator], creator);
      for (const requested of NAMED) {
        const res = await mint(key, [requested]);
        outcomes.push(`${creator} -> ${requested}: ${res.statusCode}`);
        expected.push(`${creator} -> ${requested}: ${MINTABLE[creator]?.includes(requested) ? 201 : 403}`);
        if (res.statusCode === 403) expect(res.json().error).toBe('insufficient_scope');
        if (res.statusCode === 201) expect(res.json().key.scopes).toEqual([requested]);
      }
    }
    expect(outcomes).toEqual(expected);
  });

  it('the refusal names the scopes it cannot grant, and a key without scopes asked for gets none of buyer', async () => {
    const keysOnly = await createKey(t.app, owner, ['keys:write', 'keys:read']);
    const res = await mint(keysOnly, ['keys:read', 'buyer', 'operator']);
    expect(res.statusCode).toBe(403);
    expect(res.json()).toMatchObject({ code: 403, error: 'insufficient_scope' });
    expect(res.json().message).toContain("cannot grant 'buyer', 'operator'");
    expect(res.json().message).not.toContain("'keys:read'");
    // no scopes means the default ["buyer"], which keys:write does not imply
    const byDefault = await t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/api-keys',
      headers: bearer(keysOnly),
      payload: {},
    });
    expect(byDefault.statusCode).toBe(403);
    expect((await mint(keysOnly, ['keys:write'])).statusCode).toBe(201);
    // a buyer key mints parts of buyer, but never operator nor a resource buyer lacks
    expect((await mint(owner.apiKey, ['jobs:read', 'keys'])).statusCode).toBe(201);
    expect((await mint(owner.apiKey, ['operator'])).statusCode).toBe(403);
    expect((await mint(owner.apiKey, ['memories:write'])).statusCode).toBe(403);
    // unknown scopes stay a 400 naming each
    expect((await mint(keysOnly, ['root'])).statusCode).toBe(400);
  });

  it("sessions: an owner's and an admin's mint any scope; a member's only what buyer and operator imply", async () => {
    const join = async (email: string, role: 'admin' | 'member') => {
      const inv = await t.app.inject({
        method: 'POST',
        url: '/api/v1/organizations/current/invites',
        headers: bearer(owner.token),
        payload: { email, role },
      });
      const acc = await t.app.inject({
        method: 'POST',
        url: '/api/v1/organizations/invites/accept',
        payload: { token: inv.json().invite_token, password: 'member password 1' },
      });
      expect(acc.statusCode).toBe(200);
      return acc.json().token as string;
    };
    const admin = await join('admin-minter@example.test', 'admin');
    const member = await join('member-minter@example.test', 'member');
    const table: [string, string, string[], number][] = [
      ['owner', owner.token, ['operator', 'buyer', 'memories:write', 'account'], 201],
      ['admin', admin, ['operator', 'buyer', 'memories:write', 'account'], 201],
      ['member', member, ['operator', 'buyer'], 201],
      ['member', member, ['memories:write'], 403],
      ['member', member, ['buyer', 'account:write'], 403],
    ];
    for (const [role, token, scopes, status] of table) {
      const res = await mint(token, scopes);
      expect({ role, scopes, status: res.statusCode }).toEqual({ role, scopes, status });
    }
  });

  it('revoking: a key revokes only keys it could have minted; the owner signed in revokes any', async () => {
    const revoke = (credential: string, key: string) =>
      t.app.inject({
        method: 'POST',
        url: `/api/v1/auth/api-keys/${key.split('_')[2]}/revoke`,
        headers: bearer(credential),
        payload: { reason: 'test' },
      });
    // Whether the key is still unrevoked, as the owner's key list says (a write-only key cannot read /auth/me).
    const alive = async (key: string) => {
      const { keys } = (
        await t.app.inject({ method: 'GET', url: '/api/v1/auth/api-keys', headers: bearer(owner.token) })
      ).json() as { keys: { key_id: string; revoked_at: string | null }[] };
      return keys.find((k) => k.key_id === key.split('_')[2])?.revoked_at === null;
    };
    const outcomes: string[] = [];
    const expected: string[] = [];
    for (const creator of CREATORS) {
      const credential = await createKey(t.app, owner, [creator], creator);
      for (const target of NAMED) {
        const key = await createKey(t.app, owner, [target], target);
        const res = await revoke(credential, key);
        outcomes.push(`${creator} revokes ${target}: ${res.statusCode} ${await alive(key)}`);
        const allowed = MINTABLE[creator]?.includes(target) === true;
        expected.push(`${creator} revokes ${target}: ${allowed ? '200 false' : '403 true'}`);
        if (res.statusCode === 403) expect(res.json().error).toBe('insufficient_scope');
        // The credentials allowed on the route at all are told which scope of the target stops them.
        if (res.statusCode === 403 && ['buyer', 'keys', 'keys:write'].includes(creator))
          expect(res.json().message).toContain(`which holds '${target}'`);
      }
    }
    expect(outcomes).toEqual(expected);
    const operator = await createKey(t.app, owner, ['operator'], 'node');
    expect((await revoke(owner.token, operator)).statusCode).toBe(200);
    expect(await alive(operator)).toBe(false);
  });
});
