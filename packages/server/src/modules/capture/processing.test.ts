import { createHash, randomBytes } from 'node:crypto';
import { outputManifestBytes, type OutputManifest } from '@svc/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bearer,
  createKey,
  createTestApp,
  createTestNode,
  signUp,
  type TestApp,
  type TestBuyer,
  type TestNode,
  type WorkItem,
} from '../../../test/harness.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
const local = (url: string) => {
  const u = new URL(url);
  return `${u.pathname}${u.search}`;
};

describe('capture sets processed by kind 8 and 10 jobs', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  let other: TestBuyer;
  let node: TestNode;
  const inputs = [Buffer.from('x'.repeat(3000)), randomBytes(5000)];

  const api = async (method: 'GET' | 'POST', url: string, body?: unknown, key = buyer.apiKey) => {
    const res = await t.app.inject({
      method,
      url,
      headers: bearer(key),
      ...(body === undefined ? {} : { payload: body as object }),
    });
    return { status: res.statusCode, json: res.json() as Json };
  };

  /** A capture set made ready through tus (create, one PATCH per file) and complete. */
  async function readySet(owner = buyer): Promise<string> {
    const site = (await api('POST', '/api/v1/sites', { name: 'Quarry' }, owner.apiKey)).json;
    const epoch = (await api('POST', `/api/v1/sites/${site.id}/epochs`, { label: 'e1' }, owner.apiKey)).json;
    const files = inputs.map((b, i) => ({ path: `raw/f${i}.bin`, bytes: b.length, sha256: sha(b) }));
    const created = await api(
      'POST',
      '/api/v1/capture-sets',
      { site_epoch_id: epoch.id, manifest: { version: '1', files } },
      owner.apiKey,
    );
    expect(created.status).toBe(201);
    const id = String(created.json.capture_set.id);
    for (const [i, bytes] of inputs.entries()) {
      const made = await t.app.inject({
        method: 'POST',
        url: `/api/v1/capture-sets/${id}/uploads`,
        headers: {
          ...bearer(owner.apiKey),
          'tus-resumable': '1.0.0',
          'upload-length': String(bytes.length),
          'upload-metadata': `path ${Buffer.from(`raw/f${i}.bin`).toString('base64')}`,
        },
      });
      expect(made.statusCode).toBe(201);
      const patched = await t.app.inject({
        method: 'PATCH',
        url: new URL(String(made.headers.location), 'http://x').pathname,
        headers: {
          ...bearer(owner.apiKey),
          'tus-resumable': '1.0.0',
          'upload-offset': '0',
          'content-type': 'application/offset+octet-stream',
        },
        payload: bytes,
      });
      expect(patched.statusCode).toBe(204);
    }
    const done = await api('POST', `/api/v1/capture-sets/${id}/complete`, {}, owner.apiKey);
    expect(done.json.capture_set.status).toBe('ready');
    return id;
  }

  const submit = (kind: number, captureSetId: string | undefined, key = buyer.apiKey) =>
    api(
      'POST',
      '/api/v1/marketplace/jobs',
      {
        kind,
        budget: 1.5,
        max_price_per_unit: 1,
        currency: 'CAD',
        ...(captureSetId ? { capture_set_id: captureSetId } : {}),
      },
      key,
    );

  /** What the node agent does: download and verify the inputs, PUT outputs, deliver the manifest, sign. */
  async function process(
    work: WorkItem,
    outputs: Record<string, Buffer>,
    options: { units: number; tamper?: string; usage?: Record<string, number> },
  ) {
    const payload = work.payload as { files: { path: string; sha256: string; url: string }[] };
    for (const f of payload.files) {
      const got = await t.app.inject({ method: 'GET', url: local(f.url) });
      expect(got.statusCode).toBe(200);
      expect(sha(got.rawPayload)).toBe(f.sha256);
    }
    const manifest: OutputManifest = {
      files: Object.entries(outputs).map(([path, b]) => ({ path, bytes: b.length, sha256: sha(b) })),
    };
    const urls = await node.call('POST', `/api/v1/node/work/${work.work_id}/outputs`, manifest);
    expect(urls.statusCode).toBe(200);
    for (const u of (urls.json() as { uploads: { path: string; url: string }[] }).uploads) {
      const body = u.path === options.tamper ? Buffer.from('tampered') : (outputs[u.path] ?? Buffer.alloc(0));
      const put = await t.app.inject({ method: 'PUT', url: local(u.url), payload: body });
      expect(put.statusCode).toBe(200);
    }
    const result = outputManifestBytes(manifest).toString('utf8');
    const delivered = await node.call('POST', `/api/v1/node/work/${work.work_id}/result`, {
      output: result,
      encoding: 'utf8',
      content_type: 'application/json',
      result_hash: sha(result),
      metering_units: options.units,
      ...(options.usage ? { usage: options.usage } : {}),
    });
    expect(delivered.statusCode).toBe(200);
    return { receipt: await node.receipt(work, { result_hash: sha(result), metering_units: options.units }), result };
  }

  beforeAll(async () => {
    t = await createTestApp();
    buyer = await signUp(t.app);
    other = await signUp(t.app);
    node = await createTestNode(t.app, await createKey(t.app, buyer, ['operator']), {
      capabilities: ['cpu', 'runner:8', 'runner:10'],
    });
  });
  afterAll(() => t.close());

  it('a kind 10 job takes a ready set, the node gets presigned URLs, and verified outputs make the set verified', async () => {
    const id = await readySet();
    const job = await submit(10, id);
    expect(job.status).toBe(201);
    const processing = (await api('GET', `/api/v1/capture-sets/${id}`)).json.capture_set;
    expect(processing).toMatchObject({ status: 'processing', processing_job_id: job.json.job_id, outputs: null });

    const [work] = await node.poll();
    if (!work) throw new Error('no work');
    expect(work).toMatchObject({ job_id: job.json.job_id, kind: 10 });
    const payload = work.payload as Json;
    expect(payload.capture_set_id).toBe(id);
    expect(payload.files.map((f: Json) => [f.path, f.bytes, f.sha256])).toEqual(
      inputs.map((b, i) => [`raw/f${i}.bin`, b.length, sha(b)]),
    );
    expect(payload.files[0].url).toMatch(/\/api\/v1\/objects\/[^?]+\?method=GET&expires=\d+&signature=[0-9a-f]{64}$/);
    // A GET URL cannot be used to PUT.
    expect((await t.app.inject({ method: 'PUT', url: local(payload.files[0].url), payload: 'x' })).statusCode).toBe(
      403,
    );

    const outputs = { 'summary.json': Buffer.from('{"points":42}'), 'tiles/0.bin': randomBytes(2048) };
    const { receipt, result } = await process(work, outputs, { units: 1, usage: { bytes_read: 8000 } });
    expect(receipt.statusCode).toBe(200);
    expect((receipt.json() as Json).result_hash).toBe(sha(result));

    const after = (await api('GET', `/api/v1/capture-sets/${id}`)).json.capture_set;
    expect(after.status).toBe('verified');
    expect(after.outputs).toEqual([
      { path: 'summary.json', bytes: 13, sha256: sha(outputs['summary.json']), verification: 'verified' },
      { path: 'tiles/0.bin', bytes: 2048, sha256: sha(outputs['tiles/0.bin']), verification: 'verified' },
    ]);
    const done = (await api('GET', `/api/v1/marketplace/jobs/${job.json.job_id}`)).json;
    expect(done).toMatchObject({ status: 'completed', compute_units: 1 });
    // Charged as other jobs: the node's asking price (the kind's floor, 0.01 CAD per GB) for 1 GB.
    const audit = (await api('GET', `/api/v1/marketplace/jobs/${job.json.job_id}/audit`)).json;
    expect(audit.events.map((e: Json) => e.type)).toContain('job_completed');
    expect(audit.events.find((e: Json) => e.type === 'job_completed').details.charged_micro).toBe(10_000);

    const evidence = (await api('GET', `/api/v1/jobs/${id}/evidence`)).json;
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
  });

  it('refuses what a buyer may not ask: no set, another tenant, a set not ready, a set already taken', async () => {
    expect((await submit(10, undefined)).json.details).toEqual([
      { path: '/capture_set_id', message: 'is required for data_processing (the ready capture set to process)' },
    ]);
    const id = await readySet();
    const cpu = await api('POST', '/api/v1/marketplace/jobs', {
      kind: 5,
      budget: 1,
      max_price_per_unit: 0.01,
      currency: 'CAD',
      runner_args: ['true'],
      capture_set_id: id,
    });
    expect(cpu.status).toBe(400);
    expect((await submit(8, id, other.apiKey)).status).toBe(404);
    const site = (await api('POST', '/api/v1/sites', { name: 'S' })).json;
    const epoch = (await api('POST', `/api/v1/sites/${site.id}/epochs`, { label: 'e' })).json;
    const pending = (
      await api('POST', '/api/v1/capture-sets', {
        site_epoch_id: epoch.id,
        manifest: { version: '1', files: [{ path: 'a', bytes: 1, sha256: sha('a') }] },
      })
    ).json.capture_set.id;
    const notReady = await submit(10, pending);
    expect(notReady.status).toBe(409);
    expect(notReady.json.message).toBe(
      `capture set ${pending} is pending_upload, not ready: a capture set cannot move from pending_upload to processing (from pending_upload it can move to uploading or failed)`,
    );
    expect((await submit(10, id)).status).toBe(201);
    const again = await submit(8, id);
    expect(again.status).toBe(409);
    expect(again.json.message).toContain('cannot move from processing to processing');
    // Nothing was held for the refused submissions: one hold only, the accepted job's.
    expect((await api('GET', `/api/v1/capture-sets/${id}`)).json.capture_set.status).toBe('processing');
    // Leave no pending work behind for the other tests' polls.
    const [work] = await node.poll();
    if (work) await node.call('POST', `/api/v1/node/work/${work.work_id}/fail`, { message: 'not now' });
  });

  it('refuses a receipt whose metering differs from what the server counts, and returns the set to ready when the job fails', async () => {
    const id = await readySet();
    const job = await submit(10, id);
    const [work] = await node.poll();
    if (!work) throw new Error('no work');
    const { receipt } = await process(work, { 'out.txt': Buffer.from('ok') }, { units: 3 });
    expect(receipt.statusCode).toBe(400);
    expect((receipt.json() as Json).message).toBe(
      'metering_units is 3 but this data_processing job read 1 GB (started gigabytes of the capture set)',
    );
    const failed = await node.call('POST', `/api/v1/node/work/${work.work_id}/fail`, {
      message: 'input raw/f1.bin: SHA-256 differs',
      retryable: false,
    });
    expect(failed.statusCode).toBe(200);
    expect((await api('GET', `/api/v1/marketplace/jobs/${job.json.job_id}`)).json.status).toBe('failed');
    const set = (await api('GET', `/api/v1/capture-sets/${id}`)).json.capture_set;
    expect(set.status).toBe('ready');
    const evidence = (await api('GET', `/api/v1/jobs/${id}/evidence`)).json;
    expect(evidence.events.at(-1)).toMatchObject({
      event_type: 'capture_set.processing_ended',
      summary: `job ${job.json.job_id} failed: input raw/f1.bin: SHA-256 differs`,
    });
    // Ready again: a new job can take it.
    expect((await submit(10, id)).status).toBe(201);
    const [next] = await node.poll();
    if (next) await node.call('POST', `/api/v1/node/work/${next.work_id}/fail`, { message: 'not now' });
  });

  it('kind 8 is metered in the scenes scenes.json names; an output that differs from its manifest fails the set naming it', async () => {
    const id = await readySet();
    const job = await submit(8, id);
    expect(job.status).toBe(201);
    const [work] = await node.poll();
    if (!work) throw new Error('no work');
    const outputs = { 'scenes.json': Buffer.from('{"scenes":2}'), 'mesh.ply': randomBytes(1000) };
    const { receipt } = await process(work, outputs, { units: 2, tamper: 'mesh.ply' });
    expect(receipt.statusCode).toBe(200);
    const set = (await api('GET', `/api/v1/capture-sets/${id}`)).json.capture_set;
    expect(set.status).toBe('failed');
    expect(set.failure_reason).toBe(
      `1 of 2 outputs of job ${job.json.job_id} differ from their manifest: mesh.ply (size_mismatch)`,
    );
    expect((await api('GET', `/api/v1/marketplace/jobs/${job.json.job_id}`)).json).toMatchObject({
      status: 'completed',
      compute_units: 2,
    });
  });

  it("bounds a node's declared outputs by the job's capture set: count, each size and the total (issue 40, point 10)", async () => {
    const id = await readySet();
    expect((await submit(10, id)).status).toBe(201);
    const [work] = await node.poll();
    if (!work) throw new Error('no work');
    const declare = (files: { path: string; bytes: number }[]) =>
      node.call('POST', `/api/v1/node/work/${work.work_id}/outputs`, {
        files: files.map((f) => ({ ...f, sha256: sha(f.path) })),
      });
    // The set holds 2 files of 8,000 bytes: outputs up to 2 x 8,000 + 1 GiB bytes, 2 x 2 + 100 files.
    const limit = 2 * 8000 + 2 ** 30;
    const huge = await declare([{ path: 'huge.bin', bytes: 10 ** 15 }]);
    expect([huge.statusCode, huge.json()]).toEqual([
      400,
      {
        code: 400,
        error: 'invalid_request',
        message: `the output manifest declares more than ${limit} bytes of outputs (huge.bin alone is ${10 ** 15}); this job takes at most ${limit} (capture set ${id})`,
        details: [{ path: '/files', message: expect.stringContaining('huge.bin alone') }],
      },
    ]);
    const total = await declare([
      { path: 'a.bin', bytes: limit - 10 },
      { path: 'b.bin', bytes: 11 },
    ]);
    expect([total.statusCode, total.json().message]).toEqual([
      400,
      `the output manifest declares more than ${limit} bytes of outputs; this job takes at most ${limit} (capture set ${id})`,
    ]);
    const many = await declare(Array.from({ length: 105 }, (_, i) => ({ path: `f${i}`, bytes: 1 })));
    expect([many.statusCode, many.json().message]).toEqual([
      400,
      `the output manifest declares 105 outputs; this job takes at most 104 (capture set ${id})`,
    ]);
    // At the bounds exactly: a URL per file, each taking its declared size.
    const fits = await declare([
      { path: 'a.bin', bytes: limit - 1 },
      ...Array.from({ length: 102 }, (_, i) => ({ path: `f${i}`, bytes: 0 })),
      { path: 'z.bin', bytes: 1 },
    ]);
    expect(fits.statusCode).toBe(200);
    const uploads = (fits.json() as { uploads: { path: string; url: string }[] }).uploads;
    expect(uploads).toHaveLength(104);
    expect(new URL(uploads.find((u) => u.path === 'a.bin')?.url ?? 'http://x').searchParams.get('max_bytes')).toBe(
      String(limit - 1),
    );
    await node.call('POST', `/api/v1/node/work/${work.work_id}/fail`, { message: 'not now' });
  });
});
