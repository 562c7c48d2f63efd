import type { FastifyRequest } from 'fastify';
import { ApiError } from './errors.js';

export type Role = 'owner' | 'admin' | 'member';

/** Who is calling: resolved from an API key or a session token by the auth hook. */
export interface Principal {
  kind: 'key' | 'session';
  orgId: string;
  buyerId: string;
  /** The caller's role in `orgId` (for a key: its creator's role now). */
  role: Role;
  /** Key scopes, or the scopes a session carries. */
  scopes: string[];
  keyId?: string;
  sessionId?: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
  }
}

/** The authenticated caller of a non-public route (the auth hook guarantees one). */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new ApiError('unauthorized', 'authentication required');
  return request.principal;
}

/** Throws `forbidden` unless the caller is an owner or admin of the organization. */
export function requireManager(principal: Principal, action: string): void {
  if (principal.role !== 'owner' && principal.role !== 'admin') {
    throw new ApiError('forbidden', `only owners and admins can ${action}`);
  }
}
