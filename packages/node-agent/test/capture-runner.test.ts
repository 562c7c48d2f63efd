import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NO_RUNNER, runJob, type RunContext, type WorkItem } from '../src/index.js';

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

/** A kind 8/10 program: copies every input to the output dir (as `copy/<path>`) and writes scenes.json when asked. */
const PROGRAM = `
const fs = require('node:fs'), path = require('node:path');
const [input, output] = process.argv.slice(-2);
const walk = (d) => fs.readdirSync(d, { withFileTypes: true }).flatMap((e) => e.isDirectory() ? walk(path.join(d, e.name)) : [path.join(d, e.name)]);
for (const f of walk(input)) {
  const to = path.join(output, 'copy', path.relative(input, f));
  fs.mkdirSync(path.dirname(to), { recursive: true });
  fs.copyFileSync(f, to);
}
if (process.env.SVC_JOB_KIND === '8') fs.writeFileSync(path.join(output, 'scenes.json'), '{"scenes":3}');
if (process.argv.includes('--fail')) { console.error('no points found'); process.exit(4); }
`;

describe('the kind 8 and 10 runner', () => {
  let server: Server;
  let origin: string;
  let dir: string;
  const files: Record<string, Buffer> = { 'a/one.bin': randomBytes(70_000), 'two.txt': Buffer.from('two\n') };
  const puts = new Map<string, Buffer>();
  const declared: unknown[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'svc-capture-runner-'));
    await writeFile(join(dir, 'program.cjs'), PROGRAM);
    server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      if (req.method === 'GET' && url.pathname.startsWith('/in/')) {
        const body = files[decodeURIComponent(url.pathname.slice(4))];
        if (body) res.end(body);
        else res.writeHead(404).end();
        return;
      }
      if (req.method === 'PUT' && url.pathname.startsWith('/out/')) {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          puts.set(decodeURIComponent(url.pathname.slice(5)), Buffer.concat(chunks));
          res.end('{}');
        });
        return;
      }
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await rm(dir, { recursive: true, force: true });
  });

  const ctx = (args: string[] = []): RunContext => ({
    engines: new Map(),
    dataDir: dir,
    allowProcessRunner: true,
    signal: new AbortController().signal,
    captureRunners: new Map([
      [8, { program: process.execPath, args: [join(dir, 'program.cjs'), ...args] }],
      [10, { program: process.execPath, args: [join(dir, 'program.cjs'), ...args] }],
    ]),
    signedRequest: async (method, path, body) => {
      declared.push({ method, path, body });
      const outputs = (body as { files: { path: string }[] }).files;
      return { uploads: outputs.map((o) => ({ path: o.path, url: `${origin}/out/${encodeURIComponent(o.path)}` })) };
    },
  });
  const item = (kind: number, tamper?: string): WorkItem => ({
    work_id: `wrk_cap${kind}`,
    job_id: `job_cap${kind}`,
    type: 'job',
    kind,
    model: null,
    stream: false,
    lease_expires_at: new Date(Date.now() + 60_000).toISOString(),
    payload: {
      capture_set_id: 'cs_1',
      timeout_seconds: 30,
      files: Object.entries(files).map(([path, b]) => ({
        path,
        bytes: b.length,
        sha256: path === tamper ? sha('other') : sha(b),
        url: `${origin}/in/${encodeURIComponent(path)}`,
      })),
    },
  });

  it('downloads and checks the inputs, runs the program, uploads its outputs and returns their manifest', async () => {
    const out = await runJob(item(10), ctx());
    const manifest = {
      files: [
        { path: 'copy/a/one.bin', bytes: 70_000, sha256: sha(files['a/one.bin'] ?? '') },
        { path: 'copy/two.txt', bytes: 4, sha256: sha('two\n') },
      ],
    };
    expect(JSON.parse(out.bytes.toString('utf8'))).toEqual(manifest);
    expect(out.bytes.toString('utf8')).toBe(JSON.stringify(manifest));
    // Kind 10: started gigabytes actually read (70,004 bytes is one).
    expect(out).toMatchObject({
      metering_units: 1,
      engine: 'runner:10',
      runner: 'process',
      usage: { bytes_read: 70_004, outputs: 2 },
    });
    expect(declared.at(-1)).toEqual({ method: 'POST', path: '/api/v1/node/work/wrk_cap10/outputs', body: manifest });
    expect(puts.get('copy/a/one.bin')?.equals(files['a/one.bin'] ?? Buffer.alloc(0))).toBe(true);
    expect(puts.get('copy/two.txt')?.toString()).toBe('two\n');
    expect(existsSync(join(dir, 'scratch', 'wrk_cap10'))).toBe(false);
  });

  it('meters kind 8 in the scenes the program reports in scenes.json', async () => {
    const out = await runJob(item(8), ctx());
    expect(out.metering_units).toBe(3);
    expect(puts.get('scenes.json')?.toString()).toBe('{"scenes":3}');
  });

  it('fails the run, retryable, when the outputs call answers something that is not OutputUploads', async () => {
    for (const answer of [{}, { uploads: 'nope' }, { uploads: [{ path: 'copy/two.txt' }] }, null]) {
      await expect(runJob(item(10), { ...ctx(), signedRequest: async () => answer })).rejects.toMatchObject({
        message: 'the server answered the outputs call without a list of upload URLs (OutputUploads)',
        retryable: true,
      });
    }
    expect(existsSync(join(dir, 'scratch', 'wrk_cap10'))).toBe(false);
  });

  it('fails naming the file whose SHA-256 differs, and with the stderr of a program that fails', async () => {
    await expect(runJob(item(10, 'two.txt'), ctx())).rejects.toMatchObject({
      message: `input two.txt: SHA-256 ${sha('two\n')} differs from the manifest's ${sha('other')}`,
      retryable: false,
    });
    await expect(runJob(item(10), ctx(['--fail']))).rejects.toMatchObject({
      message: 'the kind 10 program exited with 4: no points found',
      retryable: false,
    });
    expect(existsSync(join(dir, 'scratch', 'wrk_cap10'))).toBe(false);
  });

  it('runs on the host only with --allow-process-runner: without it and without the oci runner, nothing runs', async () => {
    const before = declared.length;
    await expect(runJob(item(10), { ...ctx(), allowProcessRunner: false })).rejects.toMatchObject({
      message: NO_RUNNER,
      retryable: false,
    });
    expect(declared.length).toBe(before);
    expect(existsSync(join(dir, 'scratch', 'wrk_cap10'))).toBe(false);
  });
});
