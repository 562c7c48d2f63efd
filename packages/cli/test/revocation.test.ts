import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestStore, startTestServer, TEST_STORE_KIND, type TestStore } from '@svc/server/testing';
import { spawnSvc, waitForUrl, type SpawnedSvc } from './spawn.js';

const onPostgres = TEST_STORE_KIND === 'postgres';
if (!onPostgres) console.log('[svc test] SKIPPED cross-process key revocation: needs PostgreSQL (runs in the DATABASE_URL pass)');

describe.skipIf(!onPostgres)('key revocation across server processes sharing PostgreSQL', () => {
  let store: TestStore;
  let a: Awaited<ReturnType<typeof startTestServer>>;
  let b: SpawnedSvc;
  let bUrl: string;
  beforeAll(async () => {
    store = await createTestStore();
    a = await startTestServer({ store });
    b = spawnSvc(['serve'], { SVC_PORT: '0', SVC_DATA_DIR: store.dataDir, DATABASE_URL: store.databaseUrl ?? '' });
    bUrl = await waitForUrl(b);
  });
  afterAll(async () => {
    b.child.kill('SIGTERM');
    await b.exited;
    await a.stop();
    await store.drop();
  });

  it('a key revoked on one instance is refused by the other on its next request, without a restart', async () => {
    const signup = await fetch(`${a.url}/api/v1/auth/signup`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'multi@example.test', password: 'two processes one db' }),
    });
    const { api_key: apiKey, token } = (await signup.json()) as { api_key: string; token: string };
    const me = (url: string) => fetch(`${url}/api/v1/auth/me`, { headers: { authorization: `Bearer ${apiKey}` } });
    expect((await me(bUrl)).status).toBe(200);
    const keyId = apiKey.split('_')[2];
    const revoke = await fetch(`${a.url}/api/v1/auth/api-keys/${keyId}/revoke`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ reason: 'rotation' }),
    });
    expect(revoke.status).toBe(200);
    const after = await me(bUrl);
    expect(after.status).toBe(401);
    expect(((await after.json()) as { error: string }).error).toBe('unauthorized');
    expect(b.stdout() + b.stderr()).not.toContain(apiKey.slice(30));
  });
});
