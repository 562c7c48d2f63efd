import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/**
 * Test fakes for work orders: a git host (Debian's `git http-backend` behind a small HTTP server,
 * every request needing `Authorization: Basic x-access-token:<token>`) and GitHub's pulls
 * endpoint, recording what it was asked.
 */

export interface GitHost {
  url: string;
  root: string;
  /** Requests seen: method, path, and whether the token was right. */
  requests: { method: string; path: string; authorized: boolean }[];
  /** `git` in a bare repository of the host. */
  git(repo: string, args: string[]): string;
  close(): Promise<void>;
}

const GIT_ENV = {
  ...process.env,
  GIT_CONFIG_NOSYSTEM: '1',
  HOME: tmpdir(),
  GIT_AUTHOR_NAME: 'Test',
  GIT_AUTHOR_EMAIL: 't@example.test',
  GIT_COMMITTER_NAME: 'Test',
  GIT_COMMITTER_EMAIL: 't@example.test',
};

/** Creates `<root>/<name>.git` with one commit on `main` holding `files`. */
export function seedRepository(root: string, name: string, files: Record<string, string>): string {
  const bare = join(root, `${name}.git`);
  mkdirSync(dirname(bare), { recursive: true });
  execFileSync('git', ['init', '--quiet', '--bare', '--initial-branch', 'main', bare], { env: GIT_ENV });
  execFileSync('git', ['-C', bare, 'config', 'http.receivepack', 'true'], { env: GIT_ENV });
  const work = mkdtempSync(join(tmpdir(), 'svc-seed-'));
  try {
    execFileSync('git', ['init', '--quiet', '--initial-branch', 'main', work], { env: GIT_ENV });
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(work, path)), { recursive: true });
      writeFileSync(join(work, path), text);
    }
    execFileSync('git', ['-C', work, 'add', '--all'], { env: GIT_ENV });
    execFileSync('git', ['-C', work, 'commit', '--quiet', '-m', 'initial'], { env: GIT_ENV });
    execFileSync('git', ['-C', work, 'push', '--quiet', bare, 'main'], { env: GIT_ENV });
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return bare;
}

function cgi(req: IncomingMessage, res: ServerResponse, root: string): void {
  const url = new URL(req.url ?? '/', 'http://x');
  const child = spawn('git', ['http-backend'], {
    env: {
      ...GIT_ENV,
      GIT_PROJECT_ROOT: root,
      GIT_HTTP_EXPORT_ALL: '1',
      PATH_INFO: decodeURIComponent(url.pathname),
      QUERY_STRING: url.search.slice(1),
      REQUEST_METHOD: req.method ?? 'GET',
      CONTENT_TYPE: req.headers['content-type'] ?? '',
      REMOTE_USER: 'x-access-token',
      REMOTE_ADDR: '127.0.0.1',
      ...(req.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: String(req.headers['content-encoding']) } : {}),
      ...(req.headers['git-protocol'] ? { GIT_PROTOCOL: String(req.headers['git-protocol']) } : {}),
    },
    stdio: ['pipe', 'pipe', 'ignore'],
  });
  req.pipe(child.stdin);
  let head = Buffer.alloc(0);
  let headerDone = false;
  child.stdout.on('data', (chunk: Buffer) => {
    if (headerDone) {
      res.write(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) return;
    headerDone = true;
    let status = 200;
    for (const line of head.subarray(0, end).toString('utf8').split('\r\n')) {
      const i = line.indexOf(':');
      const name = line.slice(0, i).trim();
      const value = line.slice(i + 1).trim();
      if (name.toLowerCase() === 'status') status = Number(value.split(' ')[0]);
      else res.setHeader(name, value);
    }
    res.writeHead(status);
    res.write(head.subarray(end + 4));
  });
  child.stdout.on('end', () => res.end());
}

/** A token-protected git host on loopback serving the bare repositories under its root. */
export async function startGitHost(token: string): Promise<GitHost> {
  const root = mkdtempSync(join(tmpdir(), 'svc-githost-'));
  const requests: GitHost['requests'] = [];
  const expected = `Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`;
  const server: Server = createServer((req, res) => {
    const authorized = req.headers.authorization === expected;
    requests.push({ method: req.method ?? '', path: req.url ?? '', authorized });
    if (!authorized) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="git"' }).end('token required');
      return;
    }
    cgi(req, res, root);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    root,
    requests,
    git: (repo, args) =>
      execFileSync('git', ['-C', join(root, `${repo}.git`), ...args], { env: GIT_ENV, encoding: 'utf8' }),
    async close() {
      await new Promise<void>((r) => server.close(() => r()));
      rmSync(root, { recursive: true, force: true });
    },
  };
}

export interface FakeGitHub {
  url: string;
  pulls: {
    owner: string;
    repo: string;
    title: string;
    head: string;
    base: string;
    body: string;
    number: number;
    authorization: string | undefined;
  }[];
  updates: { number: number; state: string }[];
  close(): Promise<void>;
}

/** GitHub's `POST /repos/{owner}/{repo}/pulls` and `PATCH .../pulls/{n}`, recorded. */
export async function startFakeGitHub(): Promise<FakeGitHub> {
  const pulls: FakeGitHub['pulls'] = [];
  const updates: FakeGitHub['updates'] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const m = /^\/repos\/([^/]+)\/([^/]+)\/pulls(?:\/(\d+))?$/.exec(req.url ?? '');
      const json = (status: number, value: unknown) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
      if (!m) return json(404, { message: 'Not Found' });
      const [, owner = '', repo = '', num] = m;
      const input = JSON.parse(body || '{}') as Record<string, string>;
      if (req.method === 'POST' && !num) {
        const number = pulls.length + 1;
        pulls.push({
          owner,
          repo,
          title: input.title ?? '',
          head: input.head ?? '',
          base: input.base ?? '',
          body: input.body ?? '',
          number,
          authorization: req.headers.authorization,
        });
        return json(201, { number, html_url: `https://github.test/${owner}/${repo}/pull/${number}`, state: 'open' });
      }
      if (req.method === 'PATCH' && num) {
        updates.push({ number: Number(num), state: input.state ?? '' });
        return json(200, {
          number: Number(num),
          state: input.state,
          html_url: `https://github.test/${owner}/${repo}/pull/${num}`,
        });
      }
      return json(405, { message: 'method not allowed' });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    pulls,
    updates,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
