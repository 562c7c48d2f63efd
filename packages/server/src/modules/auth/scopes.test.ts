import { describe, expect, it } from 'vitest';
import { invalidScopes, permissionsOf, scopesGrant } from './scopes.js';

describe('scopes', () => {
  it('grants buyers inference, jobs, billing, keys and organization, but not node registration', () => {
    for (const p of ['inference:write', 'jobs:write', 'jobs:read', 'billing:read', 'keys:write', 'organization:write', 'evidence:read'] as const) {
      expect(scopesGrant(['buyer'], p)).toBe(true);
    }
    expect(scopesGrant(['buyer'], 'nodes:write')).toBe(false);
  });

  it('read-only and buyer:read read but never write', () => {
    for (const scope of ['read-only', 'buyer:read']) {
      expect(scopesGrant([scope], 'jobs:read')).toBe(true);
      expect(scopesGrant([scope], 'billing:read')).toBe(true);
      expect(scopesGrant([scope], 'jobs:write')).toBe(false);
      expect(scopesGrant([scope], 'inference:write')).toBe(false);
      expect(scopesGrant([scope], 'keys:read')).toBe(false);
    }
  });

  it('write-only runs inference and uploads but reads no account data', () => {
    expect(scopesGrant(['write-only'], 'inference:write')).toBe(true);
    expect(scopesGrant(['write-only'], 'documents:write')).toBe(true);
    expect(scopesGrant(['write-only'], 'billing:read')).toBe(false);
    expect(scopesGrant(['write-only'], 'jobs:read')).toBe(false);
  });

  it('operator registers nodes and nothing of the buyer', () => {
    expect(scopesGrant(['operator'], 'nodes:write')).toBe(true);
    expect(scopesGrant(['operator'], 'inference:write')).toBe(false);
  });

  it('parses resource[:read|write]', () => {
    expect(permissionsOf('jobs')).toEqual(['jobs:read', 'jobs:write']);
    expect(permissionsOf('jobs:read')).toEqual(['jobs:read']);
    expect(permissionsOf('jobs:delete')).toBeUndefined();
    expect(permissionsOf('read-only:read')).toBeUndefined();
    expect(permissionsOf('jobs:read:x')).toBeUndefined();
    expect(invalidScopes(['buyer', 'admin', 'jobs:read', 'Buyer'])).toEqual(['admin', 'Buyer']);
  });
});
