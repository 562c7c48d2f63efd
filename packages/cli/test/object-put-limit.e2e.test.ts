import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { generateEd25519, NODE_HEADERS, publicKeyHex, registerMessage, requestMessage, signHex } from '@svc/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestStore, sendChunked, type TestStore } from '@svc/server/testing';
import { spawnSvc, waitForUrl, type SpawnedSvc } from './spawn.js';

// npm test: one store: the subject is the process staying up; the 413 and nothing stored run on both stores in
// packages/server/src/modules/objects/objects.test.ts and platform/chunked-bodies.test.ts.

/**
 * Issue 40, point 1: a node's presigned output URL (`max_bytes=1`) sent a chunked body whose first
 * chunk is already past the limit made `svc serve` exit ("Unhandled 'error' event": the size
 * limit failed while the object store still awaited its mkdir, with nobody listening). The URL
 * stays valid for an hour, so every restart died the same way. Here the exact attack goes to a
 * real `svc serve`: it must answer 413, store nothing, and stay up.
 */

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

describe('svc serve survives a chunked body past a presigned PUT URL max_bytes', () => {
  let store: TestStore;
  let server: SpawnedSvc;
  let base: string;
  let putPath: string;
  let workId: string;

  beforeAll(async () => {
    store = await createTestStore();
    server = spawnSvc(['serve', '--port', '0'], {
      SVC_DATA_DIR: store.dataDir,
      SVC_LOG_LEVEL: 'warn',
      ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
    });
    base = await waitForUrl(server);
    const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
      const res = await fetch(`${base}${path}`, {
        method,
        headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
      return (text ? JSON.parse(text) : {}) as Json;
    };
    // The attacker is one account: a buyer and the operator of its own node.
    const signup = await call('POST', '/api/v1/auth/signup', { email: 'probe@limit.test', password: 'probe the put' });
    const auth = { authorization: `Bearer ${String(signup.api_key)}` };
    const operator = await call(
      'POST',
      '/api/v1/auth/api-keys',
      { label: 'node', scopes: ['operator'] },
      { authorization: `Bearer ${String(signup.token)}` },
    );
    const { privateKey } = generateEd25519();
    const pubkey = publicKeyHex(privateKey);
    const info = {
      pubkey,
      country: 'CA',
      region: 'ca-central',
      capabilities: ['cpu', 'runner:10'],
      max_concurrency: 1,
    };
    const registered = await call(
      'POST',
      '/api/v1/node/register',
      { ...info, signature: signHex(registerMessage(pubkey, info), privateKey) },
      { authorization: `Bearer ${String(operator.api_key)}` },
    );
    const signed = (method: 'GET' | 'POST', path: string, body?: unknown) => {
      const bytes = body === undefined ? '' : JSON.stringify(body);
      const timestamp = Date.now();
      return call(method, path, body, {
        [NODE_HEADERS.node]: String(registered.node_id),
        [NODE_HEADERS.timestamp]: String(timestamp),
        [NODE_HEADERS.signature]: signHex(
          requestMessage({ method, pathWithQuery: path, timestamp, body: bytes }),
          privateKey,
        ),
      });
    };
    // A ready capture set of one small file, processed by a kind 10 job on that node.
    const input = Buffer.from('capture bytes');
    const site = await call('POST', '/api/v1/sites', { name: 'Probe' }, auth);
    const epoch = await call('POST', `/api/v1/sites/${String(site.id)}/epochs`, { label: 'e1' }, auth);
    const set = await call(
      'POST',
      '/api/v1/capture-sets',
      {
        site_epoch_id: epoch.id,
        manifest: { version: '1', files: [{ path: 'a.bin', bytes: input.length, sha256: sha(input) }] },
      },
      auth,
    );
    const setId = String(set.capture_set.id);
    const tus = { ...auth, 'tus-resumable': '1.0.0' };
    const made = await fetch(`${base}/api/v1/capture-sets/${setId}/uploads`, {
      method: 'POST',
      headers: {
        ...tus,
        'upload-length': String(input.length),
        'upload-metadata': `path ${Buffer.from('a.bin').toString('base64')}`,
      },
    });
    const location = new URL(String(made.headers.get('location')), base).pathname;
    const patched = await fetch(`${base}${location}`, {
      method: 'PATCH',
      headers: { ...tus, 'upload-offset': '0', 'content-type': 'application/offset+octet-stream' },
      body: input,
    });
    expect(patched.status).toBe(204);
    await call('POST', `/api/v1/capture-sets/${setId}/complete`, {}, auth);
    await call(
      'POST',
      '/api/v1/marketplace/jobs',
      { kind: 10, capture_set_id: setId, budget: 1, max_price_per_unit: 1, currency: 'CAD' },
      auth,
    );
    const work = (await signed('GET', '/api/v1/node/work?wait_ms=10000')).work as Json[];
    workId = String(work[0]?.work_id);
    const output = Buffer.from('x');
    const uploads = await signed('POST', `/api/v1/node/work/${workId}/outputs`, {
      files: [{ path: 'out.bin', bytes: output.length, sha256: sha(output) }],
    });
    const url = new URL(String(uploads.uploads[0].url));
    expect(url.searchParams.get('max_bytes')).toBe('1');
    putPath = `${url.pathname}${url.search}`;
  }, 120_000);

  afterAll(async () => {
    server?.child.kill('SIGTERM');
    await server?.exited;
    await store?.drop();
  });

  it('answers 413 payload_too_large to a first chunk past max_bytes, stores nothing, and stays up', async () => {
    for (let i = 0; i < 5; i += 1) {
      // Chunked, the first chunk (64 KiB against max_bytes=1) in the same write as the head.
      const res = await sendChunked(base, {
        method: 'PUT',
        path: putPath,
        headers: { 'content-type': 'application/octet-stream' },
        firstChunk: Buffer.alloc(64 * 1024, 0x61),
      });
      expect(res.status, `${res.body.slice(0, 300)}\n${server.stderr().slice(-2000)}`).toBe(413);
      expect(JSON.parse(res.body)).toEqual({
        code: 413,
        error: 'payload_too_large',
        message: 'this URL takes at most 1 bytes',
      });
      expect(res.headers.connection).toBe('close');
    }
    expect(server.child.exitCode).toBe(null);
    const health = await fetch(`${base}/api/v1/health`);
    expect(health.status).toBe(200);
    // Nothing stored, not even a partial file.
    const outputs = join(store.dataDir, 'objects', 'capture-outputs', workId);
    expect(readdirSync(outputs)).toEqual([]);
    // The URL itself still takes what it was made for.
    const ok = await fetch(`${base}${putPath}`, { method: 'PUT', body: Buffer.from('x') });
    expect([ok.status, ((await ok.json()) as Json).bytes]).toEqual([200, 1]);
    expect(readdirSync(outputs)).toHaveLength(1);
  }, 60_000);
});
