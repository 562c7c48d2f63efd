import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceContext } from '../../service-context.js';
import { createEgress, type Egress } from '../../platform/egress.js';
import { startDumbGitHost, type DumbGitHost } from '../../../test/dumb-git-host.js';
import { fetchBaseBundle, GitError, inspectWork, pinnedResolve, WorkMismatch } from './git.js';
import { remoteOf } from './repositories.js';

/** Issue 40 point 11: git connects to the address the egress guard checked, never to a later DNS answer. */
describe('git is pinned to the checked address (DNS rebinding)', () => {
  let host: DumbGitHost;
  let commit: string;
  const egresses: Egress[] = [];
  /** The guard's resolver: the first answer is the git host, every later one an address nobody serves. */
  const rebinding = () => {
    const calls: string[] = [];
    const egress = createEgress({
      allowPrivate: true,
      resolve: (name) => {
        calls.push(name);
        return Promise.resolve([{ address: calls.length === 1 ? '127.0.0.1' : '10.255.255.1', family: 4 }]);
      },
    });
    egresses.push(egress);
    return { calls, ctx: { egress } as unknown as ServiceContext };
  };

  beforeAll(async () => {
    host = await startDumbGitHost();
    commit = host.seed('acme/widgets', { 'package.json': JSON.stringify({ scripts: { test: 'node t.js' } }) });
  });
  afterAll(async () => {
    await Promise.all(egresses.map((e) => e.close()));
    await host?.close();
  });

  it('names the host, port and checked addresses in one -c http.curloptResolve (IPv6 in brackets; none for an IP literal)', () => {
    expect(pinnedResolve({ url: 'https://git.example/a.git', token: null, addresses: ['203.0.113.7'] })).toEqual([
      '-c',
      'http.curloptResolve=git.example:443:203.0.113.7',
    ]);
    expect(
      pinnedResolve({ url: 'http://git.example:8080/a.git', token: null, addresses: ['203.0.113.7', '2001:db8::1'] }),
    ).toEqual(['-c', 'http.curloptResolve=git.example:8080:203.0.113.7,[2001:db8::1]']);
    expect(pinnedResolve({ url: 'https://203.0.113.7/a.git', token: null, addresses: ['203.0.113.7'] })).toEqual([]);
    expect(pinnedResolve({ url: 'https://git.example/a.git', token: null, addresses: [] })).toEqual([]);
  });

  it("fetches from the address the guard checked, though the name resolves elsewhere afterwards and git's own DNS knows nothing of it", async () => {
    const { calls, ctx } = rebinding();
    const url = host.url('acme/widgets', 'git.svc-pinned.invalid');
    const remote = await remoteOf(ctx, null, url);
    expect(remote).toEqual({ url, token: null, addresses: ['127.0.0.1'] });
    const fetched = await fetchBaseBundle(remote, 'main');
    expect(fetched.commit).toBe(commit);
    expect(fetched.tooling.test_commands).toEqual(['npm test']);
    // One lookup, the guard's: git asked nobody else (a second lookup answers 10.255.255.1).
    expect(calls).toEqual(['git.svc-pinned.invalid']);
    expect((await remoteOf(ctx, null, url)).addresses).toEqual(['10.255.255.1']);
    // Unpinned, git resolves the name itself and finds nothing.
    await expect(fetchBaseBundle({ url, token: null, addresses: [] }, 'main')).rejects.toBeInstanceOf(GitError);
  }, 60_000);

  it('refuses a repository whose checked address is private (no private egress): git never runs', async () => {
    const egress = createEgress({
      allowPrivate: false,
      resolve: () => Promise.resolve([{ address: '10.0.0.5', family: 4 }]),
    });
    egresses.push(egress);
    const before = host.requests.length;
    await expect(
      remoteOf({ egress } as unknown as ServiceContext, null, 'https://git.example/acme/widgets.git'),
    ).rejects.toMatchObject({
      code: 'invalid_request',
      message: expect.stringContaining('must point to a public address'),
    });
    expect(host.requests.length).toBe(before);
  });
});

/** What proves a node's report false (its job's charge is reversed) is told apart from the server's own failures. */
describe("inspectWork: a work bundle that does not hold the node's commit is a WorkMismatch", () => {
  let host: DumbGitHost;
  let dir: string;
  let input: Parameters<typeof inspectWork>[0];

  beforeAll(async () => {
    host = await startDumbGitHost();
    host.seed('acme/widgets', { 'src/index.js': 'export const widgets = 1;\n' });
    const base = await fetchBaseBundle({ url: host.url('acme/widgets'), token: null, addresses: [] }, 'main');
    dir = mkdtempSync(join(tmpdir(), 'svc-inspect-'));
    const work = join(dir, 'clone');
    host.git(dir, ['clone', '--quiet', join(host.root, 'acme/widgets.git'), work]);
    host.git(work, ['checkout', '--quiet', '-B', 'svc/wo-1', base.commit]);
    writeFileSync(join(work, 'a.js'), 'export const a = 1;\n');
    host.git(work, ['add', '--all']);
    host.git(work, ['commit', '--quiet', '-m', 'work']);
    const commit = host.git(work, ['rev-parse', 'HEAD']).trim();
    host.git(work, ['bundle', 'create', '--quiet', join(dir, 'work.bundle'), `${base.commit}..svc/wo-1`]);
    const workBundle = readFileSync(join(dir, 'work.bundle'));
    input = { baseBundle: base.bundle, workBundle, workBranch: 'svc/wo-1', baseCommit: base.commit, commit };
  }, 60_000);
  afterAll(async () => {
    await host?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('recomputes what the commit changes', async () => {
    expect((await inspectWork(input)).changed_paths).toEqual(['a.js']);
  });

  it('a commit the bundle does not hold, a bundle git refuses, or a branch it lacks: WorkMismatch', async () => {
    await expect(inspectWork({ ...input, commit: 'f'.repeat(40) })).rejects.toBeInstanceOf(WorkMismatch);
    await expect(inspectWork({ ...input, workBundle: Buffer.from('not a bundle') })).rejects.toBeInstanceOf(
      WorkMismatch,
    );
    await expect(inspectWork({ ...input, workBranch: 'svc/other' })).rejects.toBeInstanceOf(WorkMismatch);
  });

  it("the server's own base bundle unreadable: a GitError, not a WorkMismatch", async () => {
    const failed = await inspectWork({ ...input, baseBundle: Buffer.from('not a bundle') }).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(GitError);
    expect(failed).not.toBeInstanceOf(WorkMismatch);
  });
});
