import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeControlPlane, type FakeControlPlane } from '@svc/node-agent/testing';
import { parseArgs } from '../src/args.js';
import { parseNodeFlags } from '../src/node.js';
import { spawnSvc } from './spawn.js';

const SPEC = {
  values: [
    'server',
    'api-key',
    'data-dir',
    'country',
    'region',
    'upstream',
    'upstream-key',
    'model',
    'gguf',
    'concurrency',
    'name',
    'capsule',
    'capsule-arg',
    'runner',
  ],
  booleans: ['allow-process-runner', 'no-channel'],
};
const flags = (argv: string[], env: NodeJS.ProcessEnv = {}) => parseNodeFlags(parseArgs(argv, SPEC), env);
const base = ['--server', 'https://svc.example', '--api-key', 'svc_key'];

async function waitFor(predicate: () => boolean, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('svc node flags', () => {
  it('accepts a full configuration', () => {
    const config = flags([
      ...base,
      '--country',
      'CA',
      '--region',
      'ca-central',
      '--upstream',
      'http://127.0.0.1:11434/v1',
      '--upstream-key',
      'up',
      '--model',
      'tinyllama=tinyllama:1.1b',
      '--model',
      'all-MiniLM-L6-v2',
      '--concurrency',
      '4',
      '--allow-process-runner',
      '--name',
      'rig one',
      '--data-dir',
      '/tmp/x',
    ]);
    expect(config).toMatchObject({
      server: 'https://svc.example',
      apiKey: 'svc_key',
      country: 'CA',
      region: 'ca-central',
      concurrency: 4,
      allowProcessRunner: true,
      channel: true,
      name: 'rig one',
      dataDir: '/tmp/x',
    });
    expect(config.upstream?.apiKey).toBe('up');
    expect([...(config.upstream?.models ?? [])]).toEqual([
      ['tinyllama', 'tinyllama:1.1b'],
      ['all-MiniLM-L6-v2', 'all-MiniLM-L6-v2'],
    ]);
    expect(flags(['--server', 'http://x', '--allow-process-runner'], { SVC_NODE_API_KEY: 'from-env' }).apiKey).toBe(
      'from-env',
    );
    expect(flags([...base, '--allow-process-runner']).dataDir).toBe(join(process.cwd(), '.svc-node'));
    expect(flags([...base, '--allow-process-runner', '--no-channel']).channel).toBe(false);
  });

  it('refuses each bad flag with a message that names it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'svc-gguf-'));
    await writeFile(join(dir, 'w.gguf'), 'x');
    const cases: [string[], string][] = [
      [['--api-key', 'k', '--allow-process-runner'], '--server URL is required'],
      [
        ['--server', 'ftp://x', '--api-key', 'k', '--allow-process-runner'],
        "--server must be an http(s) URL, got 'ftp://x'",
      ],
      [['--server', 'not a url', '--api-key', 'k', '--allow-process-runner'], '--server must be an http(s) URL'],
      [['--server', 'http://x', '--allow-process-runner'], '--api-key KEY is required'],
      [
        [...base, '--allow-process-runner', '--country', 'ca'],
        "--country must be two upper-case letters (ISO 3166-1 alpha-2, e.g. CA), got 'ca'",
      ],
      [[...base, '--allow-process-runner', '--country', 'CAN'], '--country must be two upper-case letters'],
      [[...base, '--allow-process-runner', '--region', 'ca central'], '--region must be 1 to 64 lower-case letters'],
      [
        [...base, '--allow-process-runner', '--region', 'CA-Central'],
        "--region must be 1 to 64 lower-case letters, digits or '-' (e.g. ca-central), got 'CA-Central'",
      ],
      [
        [...base, '--upstream', 'http://u', '--model', 'gpt-4'],
        "--model: 'gpt-4' is not a catalogue model (one of: phi-4,",
      ],
      [[...base, '--upstream', 'http://u', '--model', 'tinyllama='], 'the engine model after'],
      [[...base, '--model', 'tinyllama'], '--model needs --upstream BASE_URL'],
      [[...base, '--upstream', 'http://u'], '--upstream needs at least one --model'],
      [[...base, '--upstream', 'file:///x', '--model', 'tinyllama'], '--upstream must be an http(s) URL'],
      [[...base, '--upstream-key', 'k', '--allow-process-runner'], '--upstream-key needs --upstream'],
      [
        [...base, '--upstream', 'http://u', '--model', 'tinyllama', '--model', 'tinyllama'],
        "model 'tinyllama' is given more than once",
      ],
      [[...base, '--gguf', 'tinyllama'], '--gguf must be CATALOG_ID=PATH'],
      [[...base, '--gguf', 'whisper-base=/x.gguf'], 'whisper-base is a transcription model'],
      [[...base, '--gguf', 'tinyllama=/nonexistent/t.gguf'], '--gguf tinyllama: no file at /nonexistent/t.gguf'],
      [
        [...base, '--gguf', `tinyllama=${join(dir, 'w.gguf')}`, '--upstream', 'http://u', '--model', 'tinyllama'],
        'given more than once',
      ],
      [
        [...base, '--allow-process-runner', '--concurrency', '0'],
        "--concurrency must be a whole number from 1 to 16, got '0'",
      ],
      [[...base, '--allow-process-runner', '--concurrency', '17'], '--concurrency must be a whole number from 1 to 16'],
      [[...base, '--allow-process-runner', '--concurrency', '1.5'], '--concurrency must be a whole number'],
      [[...base, '--allow-process-runner', '--name', ''], '--name must be 1 to 100 characters'],
      [[...base, '--allow-process-runner', '--server', 'http://y'], '--server is given more than once'],
      [[...base, '--allow-process-runner', 'extra'], "unexpected argument 'extra'"],
      [
        base,
        'nothing to serve: give --upstream with --model, --gguf, --image, --allow-process-runner, --capsule or --runner',
      ],
      [
        [...base, '--runner', '9=true'],
        "--runner must be 8=CMD or 10=CMD (kinds 8 and 10 process capture sets), got '9=true'",
      ],
      [[...base, '--runner', '8='], '--runner must be 8=CMD or 10=CMD'],
      [[...base, '--runner', '8=true', '--runner', '8=false'], '--runner 8 is given more than once'],
      [[...base, '--runner', '10=/nonexistent/tool -x'], '--runner 10: no program at /nonexistent/tool'],
      [[...base, '--capsule-arg', 'x.mjs'], '--capsule-arg needs --capsule PROGRAM'],
      [[...base, '--capsule', '/nonexistent/capsule'], '--capsule: no program at /nonexistent/capsule'],
    ];
    for (const [argv, message] of cases) expect(() => flags(argv), argv.join(' ')).toThrow(message);
    // A capsule alone is something to serve; SVC_CAPSULE_* variables reach it without the prefix.
    expect(
      flags([...base, '--capsule', 'node', '--capsule-arg', 'c.mjs', '--capsule-arg', 'v2'], {
        SVC_CAPSULE_OPENAI_API_KEY: 'k1',
        OTHER: 'no',
      }).capsule,
    ).toEqual({ program: 'node', args: ['c.mjs', 'v2'], env: { OPENAI_API_KEY: 'k1' } });
    // A runner alone is something to serve; CMD splits on spaces into the program and its arguments.
    expect(flags([...base, '--runner', '10=node  tool.mjs --fast', '--runner', '8=true']).captureRunners).toEqual(
      new Map([
        [10, { program: 'node', args: ['tool.mjs', '--fast'] }],
        [8, { program: 'true', args: [] }],
      ]),
    );
    expect(flags([...base, '--gguf', `tinyllama=${join(dir, 'w.gguf')}`]).gguf.get('tinyllama')).toBe(
      join(dir, 'w.gguf'),
    );
    await rm(dir, { recursive: true, force: true });
  });

  it('exits 2 with the message when run as a process', async () => {
    const p = spawnSvc(['node', '--server', 'ftp://x', '--api-key', 'k', '--allow-process-runner']);
    expect(await p.exited).toBe(2);
    expect(p.stderr()).toBe("svc node: --server must be an http(s) URL, got 'ftp://x'\n");
    const q = spawnSvc(['node', '--server', 'http://x', '--api-key', 'k', '--bogus']);
    expect(await q.exited).toBe(2);
    expect(q.stderr()).toContain('unknown option --bogus');
  });
});

describe('svc node as a real process', () => {
  let cp: FakeControlPlane;
  let upstream: Server;
  let upstreamUrl: string;
  let dataDir: string;
  const upstreamCalls: unknown[] = [];
  beforeAll(async () => {
    cp = await startFakeControlPlane({ apiKey: 'svc_op_secret_never_printed' });
    upstream = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        upstreamCalls.push({ url: req.url, auth: req.headers.authorization, body: JSON.parse(body) as unknown });
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            id: 'chatcmpl-up',
            object: 'chat.completion',
            choices: [{ index: 0, message: { role: 'assistant', content: 'hi from upstream' }, finish_reason: 'stop' }],
            usage: { prompt_tokens: 7, completion_tokens: 4, total_tokens: 11 },
          }),
        );
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`;
    dataDir = await mkdtemp(join(tmpdir(), 'svc-node-cli-'));
  });
  afterAll(async () => {
    await cp.close();
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
    await rm(dataDir, { recursive: true, force: true });
  });

  it('registers, runs a job on the upstream, logs one JSON line for it and stops on SIGTERM', async () => {
    const p = spawnSvc(
      [
        'node',
        '--server',
        cp.url,
        '--data-dir',
        dataDir,
        '--country',
        'CA',
        '--upstream',
        upstreamUrl,
        '--model',
        'tinyllama=tiny:1b',
        '--name',
        'cli-test',
      ],
      { SVC_NODE_API_KEY: cp.apiKey, SVC_UPSTREAM_API_KEY: 'upstream-secret' },
    );
    await waitFor(() => p.stdout().includes('svc node: registered') || p.child.exitCode !== null, 'registration');
    const nodeId = [...cp.nodes.keys()][0];
    expect(p.stdout()).toBe(`svc node: registered ${nodeId} with ${cp.url} (country CA, models tinyllama)\n`);
    expect(JSON.parse(await readFile(join(dataDir, 'node.json'), 'utf8'))).toEqual({ node_id: nodeId, server: cp.url });

    cp.enqueue({
      work_id: 'wrk_cli',
      job_id: 'job_cli',
      type: 'job',
      kind: 1,
      model: 'tinyllama',
      payload: { inputs: ['hello'] },
    });
    await waitFor(() => p.stdout().split('\n').length > 2, 'the work log line');
    const line = JSON.parse(p.stdout().split('\n')[1] ?? '') as Record<string, unknown>;
    expect(line).toMatchObject({
      event: 'work',
      work_id: 'wrk_cli',
      job_id: 'job_cli',
      kind: 1,
      outcome: 'completed',
      metering_units: 11,
      time: expect.any(String),
    });
    expect(cp.receipts.get('wrk_cli')).toMatchObject({ job_id: 'job_cli', metering_units: 11 });
    expect(upstreamCalls[0]).toMatchObject({
      url: '/v1/chat/completions',
      auth: 'Bearer upstream-secret',
      body: { model: 'tiny:1b', messages: [{ role: 'user', content: 'hello' }] },
    });

    p.child.kill('SIGTERM');
    expect(await p.exited).toBe(0);
    expect(p.stderr()).toContain('svc node: SIGTERM: no new work');
    for (const secret of [cp.apiKey, 'upstream-secret']) expect(p.stdout() + p.stderr()).not.toContain(secret);
  });

  it('exits 1 with a clear message when the server refuses the API key', async () => {
    const p = spawnSvc([
      'node',
      '--server',
      cp.url,
      '--data-dir',
      dataDir,
      '--api-key',
      'svc_wrong_key',
      '--allow-process-runner',
    ]);
    expect(await p.exited).toBe(1);
    expect(p.stderr()).toBe(
      `svc node: registration with ${cp.url} failed: 401 unauthorized: operator API key required\n`,
    );
  });
});
