import { Type } from '@sinclair/typebox';
import { StringEnum } from '../../platform/schemas.js';

export const Email = Type.String({
  format: 'email',
  maxLength: 254,
  description: 'email address; stored trimmed and lower-cased',
});
export const Password = Type.String({ minLength: 1, maxLength: 256, description: 'at least 10 characters' });
export const RoleSchema = StringEnum(['owner', 'admin', 'member'] as const);

export const OrganizationContext = Type.Object(
  { id: Type.String(), name: Type.String(), created_at: Type.String({ format: 'date-time' }), role: RoleSchema },
  { $id: 'OrganizationContext' },
);

export const AuthRequest = Type.Object(
  { email: Email, password: Password, name: Type.Optional(Type.String({ maxLength: 200 })) },
  { $id: 'AuthRequest', additionalProperties: false },
);

export const AuthResponse = Type.Object(
  {
    api_key: Type.Optional(Type.String({ description: 'the first API key, in full; returned once, at sign-up' })),
    buyer_id: Type.String(),
    email: Type.String(),
    name: Type.String(),
    token: Type.String({ description: 'session token (JWT), valid until logout or expiry' }),
    organization: Type.Ref(OrganizationContext),
  },
  { $id: 'AuthResponse' },
);

export const MeResponse = Type.Object(
  { buyer_id: Type.String(), email: Type.String(), name: Type.String(), organization: Type.Ref(OrganizationContext) },
  { $id: 'MeResponse' },
);
