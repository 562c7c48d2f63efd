/**
 * Scopes and permissions (DESIGN.md section 6). A route needs one permission
 * (`resource:read` or `resource:write`); a key carries scopes, each granting a set of permissions.
 * Pure: no IO.
 */
export const RESOURCES = [
  'inference',
  'models',
  'jobs',
  'receipts',
  'evidence',
  'billing',
  'keys',
  'organization',
  'knowledge_bases',
  'documents',
  'memories',
  'account',
  'config',
  'nodes',
  'payouts',
  'capture_sets',
] as const;
export type Resource = (typeof RESOURCES)[number];
export type Permission = `${Resource}:${'read' | 'write'}`;

const READ_ONLY: Permission[] = [
  'models:read',
  'knowledge_bases:read',
  'memories:read',
  'jobs:read',
  'receipts:read',
  'evidence:read',
  'billing:read',
  'account:read',
  'config:read',
  'nodes:read',
  'capture_sets:read',
];

const BUYER: Permission[] = [
  ...READ_ONLY,
  'inference:write',
  'jobs:write',
  'billing:write',
  'keys:read',
  'keys:write',
  'organization:read',
  'organization:write',
  'knowledge_bases:write',
  'documents:write',
  'capture_sets:write',
];

const WRITE_ONLY: Permission[] = ['inference:write', 'documents:write', 'models:read', 'config:read'];

const OPERATOR: Permission[] = [
  'nodes:read',
  'nodes:write',
  'payouts:read',
  'payouts:write',
  'account:read',
  'config:read',
  'models:read',
];

/** The named scopes a key may carry, besides `resource[:read|write]`. */
export const SCOPE_BUNDLES: Record<string, Permission[]> = {
  buyer: BUYER,
  'read-only': READ_ONLY,
  'write-only': WRITE_ONLY,
  operator: OPERATOR,
};

/** What a signed-in person (session token) may do: everything a buyer or an operator may. */
export const SESSION_SCOPES = ['buyer', 'operator'];

function isResource(name: string): name is Resource {
  return (RESOURCES as readonly string[]).includes(name);
}

/**
 * The permissions one scope grants, or undefined for a scope that does not exist.
 * `buyer:read` is the same as `read-only`; `operator:read` is the read half of `operator`; a bare
 * resource means both.
 *
 * @example
 * permissionsOf('jobs') // ['jobs:read', 'jobs:write']
 */
export function permissionsOf(scope: string): Permission[] | undefined {
  const [name = '', mode, extra] = scope.split(':');
  if (extra !== undefined || (mode !== undefined && mode !== 'read' && mode !== 'write')) return undefined;
  // Own keys only: a scope named `constructor` or `toString` is unknown, not Object.prototype's.
  const bundle = Object.hasOwn(SCOPE_BUNDLES, name) ? SCOPE_BUNDLES[name] : undefined;
  const all: Permission[] | undefined = bundle ?? (isResource(name) ? [`${name}:read`, `${name}:write`] : undefined);
  if (!all) return undefined;
  if (bundle && (name === 'read-only' || name === 'write-only') && mode) return undefined;
  if (name === 'buyer' && mode === 'read') return READ_ONLY; // DESIGN.md: the same as read-only
  return mode ? all.filter((p) => p.endsWith(`:${mode}`)) : all;
}

/** True when any of `scopes` grants `permission`. */
export function scopesGrant(scopes: readonly string[], permission: Permission): boolean {
  return scopes.some((scope) => permissionsOf(scope)?.includes(permission) ?? false);
}

/** The scopes among `scopes` that are not valid, for a 400 naming them. */
export function invalidScopes(scopes: readonly string[]): string[] {
  return scopes.filter((scope) => permissionsOf(scope) === undefined);
}

/** Every permission there is, `resource:read` and `resource:write` of each resource. */
export const PERMISSIONS: readonly Permission[] = RESOURCES.flatMap((r): Permission[] => [`${r}:read`, `${r}:write`]);

/**
 * The requested scopes that `held` does not imply: a scope is implied when every permission it
 * grants is granted by some scope in `held` (so `buyer` implies `buyer:read`, `jobs:read` and
 * `keys`, and `jobs:read` + `jobs:write` imply `jobs`). Unknown scopes are left to
 * {@link invalidScopes}.
 *
 * @example
 * scopesNotImplied(['keys:write'], ['buyer', 'keys:write']) // ['buyer']
 */
export function scopesNotImplied(held: readonly string[], requested: readonly string[]): string[] {
  return requested.filter((scope) => !(permissionsOf(scope) ?? []).every((p) => scopesGrant(held, p)));
}

/** Who is minting a key: the parts of a principal the minting rule reads. */
export interface KeyMinter {
  kind: 'key' | 'session';
  role: 'owner' | 'admin' | 'member';
  scopes: readonly string[];
}

/**
 * The requested scopes this credential may not put on a new key (docs/authentication.md): a key,
 * or a member's session, mints only scopes its own scopes imply; an owner's or admin's session
 * (a person who manages the organization's keys) mints any valid scope.
 *
 * @example
 * scopesNotMintable({ kind: 'key', role: 'owner', scopes: ['buyer'] }, ['operator']) // ['operator']
 */
export function scopesNotMintable(minter: KeyMinter, requested: readonly string[]): string[] {
  if (minter.kind === 'session' && (minter.role === 'owner' || minter.role === 'admin')) return [];
  return scopesNotImplied(minter.scopes, requested);
}
