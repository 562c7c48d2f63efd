import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { createEgress } from '../../platform/egress.js';
import { hostRepoOf, openChangeRequest } from './host.js';

const config = {
  workOrders: { githubApiUrl: 'http://127.0.0.1:65000', githubHosts: ['github.com', 'git.example:8443'] },
  allowPrivateEgress: false,
};
const guarded = createEgress({ allowPrivate: false });
afterAll(() => guarded.close());

describe('repository hosts', () => {
  it('treats listed hosts as GitHub, by host or host:port, with owner and name from the path', () => {
    expect(hostRepoOf(config, 'https://github.com/acme/widgets.git')).toEqual({
      kind: 'github',
      owner: 'acme',
      name: 'widgets',
      web: 'https://github.com/acme/widgets',
    });
    expect(hostRepoOf(config, 'https://git.example:8443/acme/site').kind).toBe('github');
    expect(hostRepoOf(config, 'https://gitlab.example/group/sub/project.git')).toMatchObject({
      kind: 'other',
      web: 'https://gitlab.example/group/sub/project',
    });
    // A GitHub host with a path that is not owner/name cannot take a pull request.
    expect(hostRepoOf(config, 'https://github.com/acme').kind).toBe('other');
  });

  it('answers a compare URL for the pushed branch on other hosts, calling nothing', async () => {
    const repo = hostRepoOf(config, 'https://gitlab.example/group/project.git');
    expect(
      await openChangeRequest(config, guarded, repo, 'secret', {
        branch: 'svc/wo_1',
        base: 'main',
        title: 't',
        body: 'b',
      }),
    ).toEqual({
      kind: 'compare',
      url: 'https://gitlab.example/group/project/compare/main...svc/wo_1',
      number: null,
      branch: 'svc/wo_1',
      base: 'main',
    });
  });

  it('sends the GitHub API request through the egress guard: a loopback API is refused without private egress', async () => {
    const repo = hostRepoOf(config, 'https://github.com/acme/widgets.git');
    await expect(
      openChangeRequest(config, guarded, repo, 'secret', { branch: 'b', base: 'main', title: 't', body: 'b' }),
    ).rejects.toThrow(/refused to connect to 127.0.0.1: loopback/);
  });

  it('sends the API calls through the guarded dispatcher: a name that rebinds to loopback after any earlier check is refused at the connection', async () => {
    const seen: string[] = [];
    const api = createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ html_url: 'https://github.com/acme/widgets/pull/7', number: 7 }));
    });
    await new Promise<void>((done) => api.listen(0, '127.0.0.1', done));
    const port = (api.address() as AddressInfo).port;
    // The host's name resolves to a public address once (what a URL check before the call saw),
    // then to loopback: the connection is what the guard judges.
    let lookups = 0;
    const rebinding = createEgress({
      allowPrivate: false,
      resolve: () => Promise.resolve([{ address: lookups++ === 0 ? '93.184.216.34' : '127.0.0.1', family: 4 }]),
    });
    await rebinding.checkUrl(`http://api.rebind.test:${port}/`, '/repository_url');
    const allowed = createEgress({
      allowPrivate: true,
      resolve: () => Promise.resolve([{ address: '127.0.0.1', family: 4 }]),
    });
    try {
      const viaRebind = {
        ...config,
        workOrders: { ...config.workOrders, githubApiUrl: `http://api.rebind.test:${port}` },
      };
      const repo = hostRepoOf(viaRebind, 'https://github.com/acme/widgets.git');
      const pr = { branch: 'svc/wo_1', base: 'main', title: 't', body: 'b' };
      await expect(openChangeRequest(viaRebind, rebinding, repo, 'secret', pr)).rejects.toThrow(/loopback|private/);
      expect(seen).toEqual([]);
      expect(await openChangeRequest(viaRebind, allowed, repo, 'secret', pr)).toMatchObject({
        kind: 'pull_request',
        number: 7,
      });
      expect(seen).toEqual(['POST /repos/acme/widgets/pulls']);
    } finally {
      await Promise.all([rebinding.close(), allowed.close()]);
      await new Promise<void>((done) => api.close(() => done()));
    }
  });
});
