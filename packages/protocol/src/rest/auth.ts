import { Type, type Static } from '@sinclair/typebox';
import { DateTime, StringEnum } from './common.js';

/** A member's role in an organization. */
export const RoleSchema = StringEnum(['owner', 'admin', 'member'] as const);
export type Role = Static<typeof RoleSchema>;

/** The organization a session or key acts for, with the caller's role in it. */
export const OrganizationContextSchema = Type.Object(
  { id: Type.String(), name: Type.String(), created_at: DateTime, role: RoleSchema },
  { $id: 'OrganizationContext' },
);

/** The answer to sign-up, login and accepting an invite. */
export const AuthResponseSchema = Type.Object(
  {
    api_key: Type.Optional(Type.String({ description: 'the first API key, in full; returned once, at sign-up' })),
    buyer_id: Type.String(),
    email: Type.String(),
    name: Type.String(),
    token: Type.String({ description: 'session token (JWT), valid until logout or expiry' }),
    organization: Type.Ref(OrganizationContextSchema),
  },
  { $id: 'AuthResponse' },
);

/** The answer to `GET /api/v1/auth/me`. */
export const MeResponseSchema = Type.Object(
  {
    buyer_id: Type.String(),
    email: Type.String(),
    name: Type.String(),
    organization: Type.Ref(OrganizationContextSchema),
  },
  { $id: 'MeResponse' },
);
