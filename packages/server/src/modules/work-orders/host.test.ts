import { describe, expect, it } from 'vitest';
import { hostRepoOf, openChangeRequest } from './host.js';

const config = {
  workOrders: { githubApiUrl: 'http://127.0.0.1:1', githubHosts: ['github.com', 'git.example:8443'] },
  allowPrivateEgress: false,
};

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
      await openChangeRequest(config, repo, 'secret', { branch: 'svc/wo_1', base: 'main', title: 't', body: 'b' }),
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
      openChangeRequest(config, repo, 'secret', { branch: 'b', base: 'main', title: 't', body: 'b' }),
    ).rejects.toThrow(/must point to a public|private, loopback or link-local/);
  });
});
