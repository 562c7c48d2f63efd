import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestStore, TEST_STORE_KIND, type TestStore } from '@svc/server/testing';
import { spawnSvc, until, waitForUrl, type SpawnedSvc } from './spawn.js';

/** A Markdown list nested `levels` deep (3,000 levels: about 9 MB). */
const nestedList = (levels: number) =>
  Array.from({ length: levels }, (_, i) => `${' '.repeat(2 * i)}- item ${i}`).join('\n');

// On PGlite only: the process that crashes holds the embedded store, so this is also the store
// surviving three out-of-memory kills mid-write. On PostgreSQL the database outlives its client
// untouched, and what this test asks of the store (the attempt counted before work, a document
// failed after MAX_ATTEMPTS, the lease taken over) runs on both stores in
// knowledge.ingest.test.ts and knowledge.limits.test.ts. About 50 s of real processes spared.
const describeOnPglite = TEST_STORE_KIND === 'postgres' ? describe.skip : describe;

/**
 * A document that kills the server while it is ingested: parsing runs in the server process here
 * (SVC_KB_PARSE_ISOLATION=inline, the nesting limit lifted) under a small real heap limit, so the
 * 9 MB nested list is a real out-of-memory crash. Each restart must listen first, count the attempt
 * before working, and after MAX_ATTEMPTS the document is failed: no crash loop.
 */
describeOnPglite('a document that crashes svc serve cannot keep it down', () => {
  let store: TestStore;
  let running: SpawnedSvc | undefined;
  beforeAll(async () => {
    store = await createTestStore();
  });
  afterAll(async () => {
    running?.child.kill('SIGKILL');
    await store.drop();
  });
  const env = () => ({
    SVC_DATA_DIR: store.dataDir,
    SVC_PORT: '0',
    SVC_KB_PARSE_ISOLATION: 'inline',
    SVC_KB_MAX_NESTING: '10000',
    SVC_KB_LEASE_SECONDS: '2',
    // About twice what svc serve needs to start (its heap peaks near 63 MB; 64 MB fails to start):
    // each crash is V8 collecting its way to the limit, so a smaller heap is a cheaper crash
    // (256 MB cost a third more CPU for the same three crashes).
    NODE_OPTIONS: '--max-old-space-size=128',
    ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
  });

  it('crashes on the document at most MAX_ATTEMPTS times, listening after each restart, then fails it and stays up', async () => {
    running = spawnSvc(['serve'], env());
    const url = await waitForUrl(running);
    const signup = await fetch(`${url}/api/v1/auth/signup`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        email: `crash-${Date.now()}@example.test`,
        password: 'correct horse battery staple',
        name: 'Crash',
      }),
    });
    const apiKey = ((await signup.json()) as { api_key: string }).api_key;
    const auth = { authorization: `Bearer ${apiKey}` };
    const kb = (await (
      await fetch(`${url}/api/v1/knowledge-bases`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'crash' }),
      })
    ).json()) as { id: string };
    const form = new FormData();
    form.append('file', new Blob([nestedList(3000)], { type: 'text/markdown' }), 'nested.md');
    const upload = await fetch(`${url}/api/v1/knowledge-bases/${kb.id}/documents`, {
      method: 'POST',
      headers: auth,
      body: form,
    });
    expect(upload.status).toBe(202);
    const docId = ((await upload.json()) as { id: string }).id;

    const crashes: (number | string)[] = [await running.exited];
    let listened = 0;
    for (;;) {
      running = spawnSvc(['serve'], env());
      const restartedUrl = await waitForUrl(running, 90_000);
      listened++;
      const outcome = await Promise.race([
        running.exited.then((code) => ({ crashed: code })),
        until(
          'the document to fail',
          async () => {
            const res = await fetch(`${restartedUrl}/api/v1/knowledge-bases/${kb.id}/documents/${docId}`, {
              headers: auth,
            });
            const doc = (await res.json()) as { status: string; error: string | null };
            return doc.status === 'failed' ? { doc, url: restartedUrl } : undefined;
          },
          120_000,
        ),
      ]);
      if ('crashed' in outcome) {
        crashes.push(outcome.crashed);
        expect(crashes.length).toBeLessThanOrEqual(3);
        continue;
      }
      expect(outcome.doc.error).toBe('ingestion was interrupted 3 times; upload the document again');
      // Still up, and answering; below it stops cleanly on SIGTERM (a crash would have ended it otherwise).
      expect((await fetch(`${outcome.url}/api/v1/health`)).status).toBe(200);
      expect(running.child.exitCode).toBeNull();
      break;
    }
    // Three real crashes (out of memory), each restart listened, the fourth start failed the document.
    expect(crashes).toHaveLength(3);
    for (const c of crashes) expect(c).not.toBe(0);
    expect(listened).toBe(3);
    running.child.kill('SIGTERM');
    expect(await running.exited).toBe(0);
    running = undefined;
  }, 600_000);
});
