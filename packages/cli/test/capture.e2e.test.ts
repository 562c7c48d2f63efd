import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Upload } from 'tus-js-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestStore,
  startTestS3,
  svc1VerifiesIndependently,
  type TestS3,
  type TestStore,
} from '@svc/server/testing';
import { spawnSvc, until, waitForUrl, type SpawnedSvc } from './spawn.js';

// npm test: one store: the subject is the upload over the wire (tus, cut and resumed) into either blob store and the
// processes around it; capture sets, their uploads and processing jobs run on both stores in
// packages/server/src/modules/capture/*.test.ts.

/**
 * The acceptance of issue 24: a capture set goes from create to `verified` through real `svc
 * serve` and `svc node` processes, on each blob store: a generated 200 MB file plus a small one,
 * uploaded through tus with the big one cut at about half and resumed from its offset, then
 * processed by a job:
 * - the local object store (the data-dir directory), a kind 10 (`data_processing`) job;
 * - S3 (s3rver, with the tus S3 store), a kind 8 (`scene_reconstruction`) job.
 * Each takes about 13 s (measured 2026-11-24: 12.2 s local, 13.9 s on s3rver, from create to
 * verified).
 */

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const MB = 1024 * 1024;

/** The operator's program: reads every input, writes summary.json (path, bytes, SHA-256 each) and, for kind 8, one scene. */
const PROGRAM = `
const fs = require('node:fs'), path = require('node:path'), crypto = require('node:crypto');
const [input, output] = process.argv.slice(-2);
const walk = (d) => fs.readdirSync(d, { withFileTypes: true }).flatMap((e) => e.isDirectory() ? walk(path.join(d, e.name)) : [path.join(d, e.name)]);
(async () => {
  const files = [];
  for (const f of walk(input).sort()) {
    const hash = crypto.createHash('sha256');
    let bytes = 0;
    for await (const chunk of fs.createReadStream(f)) { hash.update(chunk); bytes += chunk.length; }
    files.push({ path: path.relative(input, f), bytes, sha256: hash.digest('hex') });
  }
  fs.writeFileSync(path.join(output, 'summary.json'), JSON.stringify({ files }));
  if (process.env.SVC_JOB_KIND === '8') {
    fs.mkdirSync(path.join(output, 'scene-1'));
    fs.writeFileSync(path.join(output, 'scene-1', 'mesh.ply'), 'ply\\nformat ascii 1.0\\nend_header\\n');
    fs.writeFileSync(path.join(output, 'scenes.json'), JSON.stringify({ scenes: 1 }));
  }
})();
`;

/** Writes `bytes` pseudo-random bytes to `path` by streaming and returns their SHA-256. */
async function generate(path: string, bytes: number): Promise<string> {
  const hash = createHash('sha256');
  const out = createWriteStream(path);
  const block = randomBytes(MB);
  for (let written = 0; written < bytes; written += block.length) {
    block.writeUInt32BE(written / block.length, 0);
    const piece = block.subarray(0, Math.min(block.length, bytes - written));
    hash.update(piece);
    if (!out.write(piece)) await new Promise<void>((r) => out.once('drain', () => r()));
  }
  await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
  return hash.digest('hex');
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const address = server.address();
  await new Promise<void>((r) => server.close(() => r()));
  return typeof address === 'object' && address ? address.port : 0;
}

const COMBINATIONS = [
  { store: 'the local object store', s3: false, big: 200 * MB, kind: 10, cut: true },
  { store: 'S3 (s3rver)', s3: true, big: 200 * MB, kind: 8, cut: true },
].map((c) => ({ ...c, name: `${c.store}, ${c.big / MB} MB cut and resumed, kind ${c.kind}` }));

describe.each(COMBINATIONS)('a capture set from create to verified on $name', ({ s3: useS3, big, kind, cut }) => {
  let store: TestStore;
  let s3: TestS3 | undefined;
  let server: SpawnedSvc;
  let node: SpawnedSvc;
  let base: string;
  let buyerKey: string;
  let dir: string;
  const api = async (path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: {
        authorization: `Bearer ${buyerKey}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, json: (await res.json()) as Json };
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-capture-e2e-'));
    store = await createTestStore();
    s3 = useS3 ? await startTestS3() : undefined;
    const port = await freePort();
    server = spawnSvc(['serve'], {
      SVC_DATA_DIR: store.dataDir,
      SVC_PORT: String(port),
      SVC_LOG_LEVEL: 'warn',
      ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
      ...(s3?.env ?? {}),
    });
    base = await waitForUrl(server);
    const signup = async (email: string) =>
      (await (
        await fetch(`${base}/api/v1/auth/signup`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ email, password: 'capture end to end' }),
        })
      ).json()) as { api_key: string; token: string };
    buyerKey = (await signup('buyer@capture.test')).api_key;
    const owner = (await signup('operator@capture.test')).token;
    const minted = await fetch(`${base}/api/v1/auth/api-keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${owner}`, 'content-type': 'application/json' },
      body: JSON.stringify({ label: 'node', scopes: ['operator'] }),
    });
    const operatorKey = ((await minted.json()) as { api_key: string }).api_key;
    writeFileSync(join(dir, 'process.cjs'), PROGRAM);
    const cmd = `${process.execPath} ${join(dir, 'process.cjs')}`;
    node = spawnSvc(
      [
        'node',
        '--server',
        base,
        '--data-dir',
        join(dir, 'node'),
        '--allow-process-runner',
        '--runner',
        `8=${cmd}`,
        '--runner',
        `10=${cmd}`,
      ],
      { SVC_NODE_API_KEY: operatorKey },
    );
    await until('node registration', async () => /registered node_/.exec(node.stdout())?.[0]);
  });

  afterAll(async () => {
    node?.child.kill('SIGKILL');
    server?.child.kill('SIGTERM');
    await server?.exited;
    await s3?.close();
    await store?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('creates, uploads through tus, completes, processes on the node and verifies', async () => {
    const started = Date.now();
    const bigPath = join(dir, 'scan.bin');
    const bigSha = await generate(bigPath, big);
    const small = Buffer.from('capture notes\n');
    const site = (await api('/api/v1/sites', { name: 'Bridge 7', country: 'CA' })).json;
    const epoch = (await api(`/api/v1/sites/${site.id}/epochs`, { label: '2026-Q4' })).json;
    const created = await api('/api/v1/capture-sets', {
      site_epoch_id: epoch.id,
      source_type: 'lidar',
      manifest: {
        version: '1',
        files: [
          { path: 'lidar/scan.bin', bytes: big, sha256: bigSha },
          { path: 'notes.txt', bytes: small.length, sha256: createHash('sha256').update(small).digest('hex') },
        ],
      },
    });
    expect(created.status).toBe(201);
    const id = String(created.json.capture_set.id);
    const endpoint = `${base}/api/v1/capture-sets/${id}/uploads`;
    const upload = (input: unknown, options: Record<string, unknown>) =>
      new Upload(input as Buffer, { headers: { authorization: `Bearer ${buyerKey}` }, retryDelays: [], ...options });

    let uploadUrl: string | null = null;
    if (cut) {
      await new Promise<void>((resolve, reject) => {
        const first = upload(createReadStream(bigPath), {
          endpoint,
          metadata: { path: 'lidar/scan.bin' },
          chunkSize: 16 * MB,
          onProgress: (sent: number) => {
            if (sent >= big / 2 && first.url) {
              uploadUrl = first.url;
              void first.abort().then(resolve, reject);
            }
          },
          onError: reject,
          onSuccess: () => reject(new Error('the first attempt was meant to be cut')),
        });
        first.start();
      });
      // Where the server says it stopped, once the cut PATCH has settled.
      const offsetOf = async () =>
        Number(
          (
            await fetch(String(uploadUrl), {
              method: 'HEAD',
              headers: { authorization: `Bearer ${buyerKey}`, 'tus-resumable': '1.0.0' },
            })
          ).headers.get('upload-offset'),
        );
      let offset = -1;
      for (let now = await offsetOf(); now !== offset; now = await offsetOf()) {
        offset = now;
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(offset).toBeGreaterThanOrEqual(big / 2 - 16 * MB);
      expect(offset).toBeLessThan(big);
      expect((await api(`/api/v1/capture-sets/${id}`)).json.capture_set.status).toBe('uploading');
    }
    let resumedFrom = -1;
    await new Promise<void>((resolve, reject) => {
      upload(createReadStream(bigPath), {
        endpoint,
        ...(uploadUrl ? { uploadUrl } : {}),
        metadata: { path: 'lidar/scan.bin' },
        chunkSize: 64 * MB,
        onProgress: (sent: number) => {
          if (resumedFrom < 0) resumedFrom = sent;
        },
        onError: reject,
        onSuccess: () => resolve(),
      }).start();
    });
    if (cut) expect(resumedFrom).toBeGreaterThan(big / 2 - 16 * MB);
    await new Promise<void>((resolve, reject) =>
      upload(small, { endpoint, metadata: { path: 'notes.txt' }, onError: reject, onSuccess: () => resolve() }).start(),
    );
    const ready = await api(`/api/v1/capture-sets/${id}/complete`, {});
    expect(ready.json.capture_set.failure_reason).toBeNull();
    expect(ready.json.capture_set).toMatchObject({ status: 'ready', raw_bytes: big + small.length });

    const job = await api('/api/v1/marketplace/jobs', {
      kind,
      budget: 2,
      max_price_per_unit: 1,
      currency: 'CAD',
      capture_set_id: id,
      timeout_seconds: 600,
    });
    expect(job.status).toBe(201);
    const jobId = String(job.json.job_id);
    const done = await until(
      'the capture set verified',
      async () => {
        const set = (await api(`/api/v1/capture-sets/${id}`)).json.capture_set;
        if (set.status === 'failed') throw new Error(`capture set failed: ${set.failure_reason}`);
        return set.status === 'verified' ? set : undefined;
      },
      120_000,
    );
    const took = Date.now() - started;

    // The outputs, as stored and checked: the program's summary names both inputs with their hashes.
    const paths = (done.outputs as Json[]).map((o) => [o.path, o.verification]);
    expect(paths).toEqual(
      kind === 8
        ? [
            ['scene-1/mesh.ply', 'verified'],
            ['scenes.json', 'verified'],
            ['summary.json', 'verified'],
          ]
        : [['summary.json', 'verified']],
    );
    const finished = (await api(`/api/v1/marketplace/jobs/${jobId}`)).json;
    // Kind 10: 200 MB (or 32 MB) read is one started gigabyte; kind 8: the one scene scenes.json names.
    expect(finished).toMatchObject({ status: 'completed', compute_units: 1 });
    const receipts = (await api(`/api/v1/jobs/${jobId}/receipts`)).json.receipts as Json[];
    expect(receipts).toHaveLength(1);
    const receipt = receipts[0] as Json;
    expect(svc1VerifiesIndependently(receipt as Parameters<typeof svc1VerifiesIndependently>[0])).toBe(true);
    // The receipt's result hash is the SHA-256 of the output manifest (its exact bytes).
    const manifest = JSON.stringify({
      files: (done.outputs as Json[]).map((o) => ({ path: o.path, bytes: o.bytes, sha256: o.sha256 })),
    });
    expect(receipt.result_hash).toBe(createHash('sha256').update(manifest).digest('hex'));

    const evidence = (await api(`/api/v1/jobs/${id}/evidence`)).json;
    expect(evidence.events.map((e: Json) => e.event_type)).toEqual([
      'capture_set.created',
      'capture_set.uploading',
      'capture_set.file_verified',
      'capture_set.file_verified',
      'capture_set.completed',
      'capture_set.processing',
      'capture_set.job_assigned',
      'capture_set.outputs_verified',
      'capture_set.verified',
    ]);
    expect(evidence.certificate.verified).toBe(true);
    console.log(`capture e2e (${useS3 ? 's3' : 'local'}, ${big / MB} MB): create to verified in ${took} ms`);
  }, 180_000);
});
