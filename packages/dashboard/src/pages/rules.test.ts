import { describe, expect, it } from 'vitest';
import type { Member } from '../types';
import { match } from '../router';
import { joinCsvPages } from './billing';
import { eventLabel } from './job';
import { startCommand } from './nodes';
import { allowedActions } from './organization';

const member = (role: Member['role'], id = 'buy_x'): Member => ({
  buyer_id: id,
  email: `${id}@x.test`,
  name: '',
  created_at: '',
  role,
});

describe('what the pages decide', () => {
  it('offers member actions exactly as the API allows each role', () => {
    const owner = { role: 'owner' as const, buyerId: 'buy_me' };
    const admin = { role: 'admin' as const, buyerId: 'buy_me' };
    const plain = { role: 'member' as const, buyerId: 'buy_me' };
    expect(allowedActions(owner, member('owner'))).toEqual({ roles: ['owner', 'admin', 'member'], canRemove: true });
    expect(allowedActions(admin, member('owner'))).toEqual({ roles: [], canRemove: false }); // only owners touch owners
    expect(allowedActions(admin, member('member'))).toEqual({ roles: ['admin', 'member'], canRemove: true }); // admins cannot make owners
    expect(allowedActions(plain, member('member'))).toEqual({ roles: [], canRemove: false });
  });

  it('joins CSV pages under one header row', () => {
    const header = 'id,created_at\r\n';
    expect(joinCsvPages([`${header}a,1\r\n`, `${header}b,2\r\n`, header])).toBe(`${header}a,1\r\nb,2\r\n`);
    expect(joinCsvPages([header])).toBe(header);
  });

  it('names audit events for people', () => {
    expect(eventLabel('job_lease_lost')).toBe('Lease lost');
    expect(eventLabel('webhook.delivered')).toBe('Webhook delivered');
  });

  it('gives the commands that install the agent from this server and start a node, with the key kept out of the command line', () => {
    const command = startCommand('https://svc.example', 'https://svc.example/api/v1/downloads/svc-0.1.0.tgz');
    const lines = command.split('\n');
    expect(lines[0]).toMatch(/^npm install -g https:\/\/svc\.example\/api\/v1\/downloads\/svc-0\.1\.0\.tgz /);
    expect(command).toContain('\nsvc node --server https://svc.example ');
    expect(command).toContain('\nsvc node doctor --server https://svc.example ');
    expect(command).not.toContain('npx');
    expect(command).toContain('export SVC_NODE_API_KEY=');
    expect(command).not.toContain('--api-key');
  });

  it('matches client routes with parameters', () => {
    expect(match('/jobs/:id', '/jobs/job_1')).toEqual({ id: 'job_1' });
    expect(match('/jobs/:id', '/jobs')).toBeUndefined();
    expect(match('/keys', '/keys')).toEqual({});
  });
});
