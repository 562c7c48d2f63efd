import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestStore, startTestServer, TEST_STORE_KIND, type TestStore } from '@svc/server/testing';
import { spawnSvc, waitForUrl, type SpawnedSvc } from './spawn.js';

const onPostgres = TEST_STORE_KIND === 'postgres';
if (!onPostgres)
  console.log('[svc test] SKIPPED cross-process key revocation: needs PostgreSQL (runs in the DATABASE_URL pass)');

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

  it('a key revoked on one instance is refused by the other within the bound of the revoke answer (measured), without a restart', async () => {
    const signup = await fetch(`${a.url}/api/v1/auth/signup`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'multi@example.test', password: 'two processes one db' }),
    });
    const { api_key: firstKey, token } = (await signup.json()) as { api_key: string; token: string };
    const me = (url: string, key: string) =>
      fetch(`${url}/api/v1/auth/me`, { headers: { authorization: `Bearer ${key}` } });
    const stillWorks: number[] = [];
    const refusedAfter: number[] = [];
    for (let trial = 0; trial < 10; trial++) {
      const created = await fetch(`${a.url}/api/v1/auth/api-keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ label: `trial ${trial}`, scopes: ['read-only'] }),
      });
      const apiKey = trial === 0 ? firstKey : ((await created.json()) as { api_key: string }).api_key;
      // Used on B first, so that B holds the key in its cache.
      expect((await me(bUrl, apiKey)).status).toBe(200);
      const keyId = apiKey.split('_')[2];
      const revoke = await fetch(`${a.url}/api/v1/auth/api-keys/${keyId}/revoke`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ reason: 'rotation' }),
      });
      expect(revoke.status).toBe(200);
      const answered = performance.now();
      let accepted = 0;
      for (;;) {
        const after = await me(bUrl, apiKey);
        if (after.status === 401) {
          expect(((await after.json()) as { error: string }).error).toBe('unauthorized');
          break;
        }
        expect(after.status).toBe(200);
        accepted++;
        if (performance.now() - answered > 2_000) break;
      }
      refusedAfter.push(performance.now() - answered);
      stillWorks.push(accepted);
      expect(b.stdout() + b.stderr()).not.toContain(apiKey.slice(30));
    }
    const sorted = [...refusedAfter].sort((x, y) => x - y);
    console.log(
      `[svc test] revoked key refused on the other instance after ${sorted.map((ms) => ms.toFixed(1)).join(', ')} ms (requests still accepted: ${stillWorks.join(', ')})`,
    );
    // docs/authentication.md: the target is 50 ms after the revoke call's answer (the median must
    // meet it; single trials on a loaded machine wait on the OS scheduler), and never more than
    // the 1 s contract, which the cache's maximum entry age enforces even without the bus.
    expect(sorted[Math.floor(sorted.length / 2)]).toBeLessThan(50);
    expect(Math.max(...refusedAfter)).toBeLessThan(1_000);
  });
});
