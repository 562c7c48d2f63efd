import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join, resolve, sep } from 'node:path';

/**
 * A read-only git host for server tests: bare repositories served over git's "dumb" HTTP
 * protocol by a static file server on loopback (clone and fetch work; a push cannot). Every
 * request is recorded, so a test can assert that nothing was pushed.
 */
export interface DumbGitHost {
  port: number;
  root: string;
  /** Method and path of every request, in order. */
  requests: { method: string; path: string }[];
  /** The repository's URL under `host` (default 127.0.0.1). */
  url(repo: string, host?: string): string;
  /** `git` with `args` in `cwd` (a test's own clone or the host's bare repository). */
  git(cwd: string, args: string[]): string;
  /** Creates `<name>.git` with one commit on `main` holding `files`; answers its commit. */
  seed(name: string, files: Record<string, string>): string;
  close(): Promise<void>;
}

export const TEST_GIT_ENV = {
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  HOME: tmpdir(),
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_AUTHOR_NAME: 'Test',
  GIT_AUTHOR_EMAIL: 't@example.test',
  GIT_COMMITTER_NAME: 'Test',
  GIT_COMMITTER_EMAIL: 't@example.test',
};

/**
 * Starts the host on an ephemeral loopback port.
 *
 * @example
 * const host = await startDumbGitHost();
 * host.seed('acme/widgets', { 'package.json': '{}' });
 * host.url('acme/widgets'); // http://127.0.0.1:PORT/acme/widgets.git
 */
export async function startDumbGitHost(): Promise<DumbGitHost> {
  const root = mkdtempSync(join(tmpdir(), 'svc-dumbgit-'));
  const requests: DumbGitHost['requests'] = [];
  const git = (cwd: string, args: string[]) => execFileSync('git', args, { cwd, env: TEST_GIT_ENV, encoding: 'utf8' });
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    requests.push({ method: req.method ?? '', path });
    const file = resolve(root, `.${path}`);
    if (req.method !== 'GET' || !file.startsWith(root + sep)) return res.writeHead(405).end();
    try {
      if (!statSync(file).isFile()) throw new Error('not a file');
      res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(readFileSync(file));
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    port,
    root,
    requests,
    url: (repo, host = '127.0.0.1') => `http://${host}:${port}/${repo}.git`,
    git,
    seed(name, files) {
      const bare = join(root, `${name}.git`);
      mkdirSync(dirname(bare), { recursive: true });
      git(root, ['init', '--quiet', '--bare', '--initial-branch', 'main', bare]);
      const work = mkdtempSync(join(tmpdir(), 'svc-dumbgit-seed-'));
      try {
        git(work, ['init', '--quiet', '--initial-branch', 'main']);
        for (const [p, text] of Object.entries(files)) {
          mkdirSync(dirname(join(work, p)), { recursive: true });
          writeFileSync(join(work, p), text);
        }
        git(work, ['add', '--all']);
        git(work, ['commit', '--quiet', '-m', 'initial']);
        git(work, ['push', '--quiet', bare, 'main']);
      } finally {
        rmSync(work, { recursive: true, force: true });
      }
      git(bare, ['update-server-info']);
      return git(bare, ['rev-parse', 'refs/heads/main']).trim();
    },
    async close() {
      await new Promise<void>((r) => server.close(() => r()));
      rmSync(root, { recursive: true, force: true });
    },
  };
}
