import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runProcess } from '../src/runners/index.js';

const CAPSULE = fileURLToPath(new URL('../capsules/reference-capsule.mjs', import.meta.url));
const GIT_ENV = {
  ...process.env,
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_AUTHOR_NAME: 'T',
  GIT_AUTHOR_EMAIL: 't@x.test',
  GIT_COMMITTER_NAME: 'T',
  GIT_COMMITTER_EMAIL: 't@x.test',
};
const DIFF = [
  'diff --git a/src/index.js b/src/index.js',
  '--- a/src/index.js',
  '+++ b/src/index.js',
  '@@ -1 +1,2 @@',
  ' export const a = 1;',
  '+export const b = 2;',
  '',
].join('\n');

describe('the reference capsule', () => {
  let server: Server;
  let url: string;
  const asked: { model: string; authorization: string | undefined; prompt: string }[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        const request = JSON.parse(body) as { model: string; messages: { content: string }[] };
        asked.push({
          model: request.model,
          authorization: req.headers.authorization,
          prompt: request.messages[1]?.content ?? '',
        });
        const content = `Here it is:\n\`\`\`diff\n${DIFF}\`\`\`\n`;
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            id: 'chatcmpl-1',
            object: 'chat.completion',
            created: 1,
            model: request.model,
            choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
            usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
          }),
        );
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const a = server.address();
    url = `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}/v1`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('asks the chat completions for a diff, applies it and names the checks for the required ones', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-refcap-'));
    const repo = join(dir, 'repo');
    execFileSync('git', ['init', '--quiet', repo], { env: GIT_ENV });
    execFileSync('mkdir', ['-p', join(repo, 'src')]);
    writeFileSync(join(repo, 'src/index.js'), 'export const a = 1;\n');
    execFileSync('git', ['-C', repo, 'add', '--all'], { env: GIT_ENV });
    execFileSync('git', ['-C', repo, 'commit', '--quiet', '-m', 'init'], { env: GIT_ENV });
    const order = {
      work_order_id: 'wo_1',
      goal: 'export b',
      title: null,
      architecture_plan: 'one line',
      model: 'tinyllama',
      base_branch: 'main',
      work_branch: 'svc/wo_1',
      allowed_paths: ['src/**'],
      forbidden_paths: ['.github/**'],
      required_checks: ['test', 'lint'],
      tooling: { package_managers: ['npm'], test_commands: ['npm test', 'npm run lint'], files: ['package.json'] },
    };
    writeFileSync(join(dir, 'order.json'), JSON.stringify(order));
    const r = await runProcess({
      program: process.execPath,
      args: [CAPSULE],
      cwd: repo,
      timeoutMs: 30_000,
      signal: new AbortController().signal,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: dir,
        TMPDIR: dir,
        SVC_WORK_ORDER: join(dir, 'order.json'),
        SVC_CAPSULE_RESULT: join(dir, 'result.json'),
        OPENAI_BASE_URL: url,
        OPENAI_API_KEY: 'svc_live_capsule',
      },
    });
    expect(r.exit_code, r.stderr).toBe(0);
    expect(readFileSync(join(repo, 'src/index.js'), 'utf8')).toBe('export const a = 1;\nexport const b = 2;\n');
    expect(JSON.parse(readFileSync(join(dir, 'result.json'), 'utf8'))).toMatchObject({
      checks: [
        ['npm', 'test'],
        ['npm', 'run', 'lint'],
      ],
    });
    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatchObject({ model: 'tinyllama', authorization: 'Bearer svc_live_capsule' });
    expect(asked[0]?.prompt).toContain('Goal: export b');
    expect(asked[0]?.prompt).toContain('You may change only paths matching: src/**');
    rmSync(dir, { recursive: true, force: true });
  });
});
