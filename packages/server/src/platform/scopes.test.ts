import { describe, expect, it } from 'vitest';
import {
  PERMISSIONS,
  RESOURCES,
  SESSION_SCOPES,
  invalidScopes,
  permissionsOf,
  scopesGrant,
  scopesNotImplied,
  scopesNotMintable,
} from './scopes.js';

describe('scopes', () => {
  it('grants buyers inference, jobs, billing, keys and organization, but not node registration', () => {
    for (const p of [
      'inference:write',
      'jobs:write',
      'jobs:read',
      'billing:read',
      'keys:write',
      'organization:write',
      'evidence:read',
    ] as const) {
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

  it("names of Object.prototype's members are unknown scopes, not bundles (the OpenAPI fuzz found a 500)", () => {
    const names = ['constructor', 'toString', '__proto__', 'hasOwnProperty', 'valueOf', 'constructor:read'];
    for (const name of names) expect(permissionsOf(name)).toBeUndefined();
    expect(invalidScopes(names)).toEqual(names);
    expect(scopesGrant(['constructor'], 'jobs:read')).toBe(false);
  });
});

/** Every scope the grammar allows: the named ones of DESIGN.md section 6, their halves, and resource[:read|write]. */
const ALL_SCOPES = [
  'buyer',
  'buyer:read',
  'buyer:write',
  'read-only',
  'write-only',
  'operator',
  'operator:read',
  'operator:write',
  ...RESOURCES.flatMap((r) => [r, `${r}:read`, `${r}:write`]),
];

describe('key minting: a key mints only scopes its own imply', () => {
  it('the named scopes of the table, pair by pair (written out by hand)', () => {
    const named = ['buyer', 'read-only', 'write-only', 'buyer:read', 'operator'];
    // row: the creator's scope; columns in the order of `named`; 1 = may mint
    const expected: Record<string, number[]> = {
      buyer: [1, 1, 1, 1, 0],
      'read-only': [0, 1, 0, 1, 0],
      'write-only': [0, 0, 1, 0, 0],
      'buyer:read': [0, 1, 0, 1, 0],
      operator: [0, 0, 0, 0, 1],
    };
    for (const creator of named) {
      const got = named.map((requested) => (scopesNotImplied([creator], [requested]).length === 0 ? 1 : 0));
      expect({ creator, got }).toEqual({ creator, got: expected[creator] });
    }
  });

  it('every pair of scopes: allowed exactly when each permission of the requested one is granted to the creator', () => {
    expect(ALL_SCOPES.length).toBeGreaterThan(40);
    for (const creator of ALL_SCOPES) {
      for (const requested of ALL_SCOPES) {
        const covered = PERMISSIONS.every((p) => !scopesGrant([requested], p) || scopesGrant([creator], p));
        expect({ creator, requested, allowed: scopesNotImplied([creator], [requested]).length === 0 }).toEqual({
          creator,
          requested,
          allowed: covered,
        });
        // a key minting through the route: the same answer
        expect(scopesNotMintable({ kind: 'key', role: 'owner', scopes: [creator] }, [requested]).length === 0).toBe(
          covered,
        );
      }
      expect(scopesNotImplied([creator], [creator])).toEqual([]);
    }
  });

  it('the escalations the probe found are refused', () => {
    for (const creator of ['keys', 'keys:write', 'buyer:write']) {
      expect(scopesNotImplied([creator], ['buyer', 'operator', 'keys:write'])).toEqual(['buyer', 'operator']);
    }
    expect(scopesNotImplied(['buyer'], ['operator', 'nodes:write', 'payouts'])).toEqual([
      'operator',
      'nodes:write',
      'payouts',
    ]);
    expect(scopesNotImplied(['buyer'], ['buyer:read', 'jobs', 'keys', 'read-only'])).toEqual([]);
    expect(scopesNotImplied(['jobs:read', 'jobs:write'], ['jobs'])).toEqual([]);
    expect(scopesNotImplied(['jobs:read'], ['jobs'])).toEqual(['jobs']);
  });

  it("owners' and admins' sessions mint any scope; a member's session only what buyer and operator imply", () => {
    const session = (role: 'owner' | 'admin' | 'member') => ({
      kind: 'session' as const,
      role,
      scopes: SESSION_SCOPES,
    });
    expect(scopesNotMintable(session('owner'), ALL_SCOPES)).toEqual([]);
    expect(scopesNotMintable(session('admin'), ALL_SCOPES)).toEqual([]);
    expect(scopesNotMintable(session('member'), ['buyer', 'operator', 'read-only', 'jobs'])).toEqual([]);
    expect(scopesNotMintable(session('member'), ['memories:write', 'account:write'])).toEqual([
      'memories:write',
      'account:write',
    ]);
    // a key is held to its scopes whatever its creator's role
    expect(scopesNotMintable({ kind: 'key', role: 'owner', scopes: ['buyer'] }, ['operator'])).toEqual(['operator']);
  });
});
