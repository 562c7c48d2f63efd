import { SignJWT, jwtVerify } from 'jose';

export interface SessionClaims {
  sessionId: string;
  buyerId: string;
  orgId: string;
}

const ISSUER = 'svc';

/**
 * Signs a session token (JWT, HS256) naming the session row; the row decides whether it is still
 * valid, so logout takes effect at once.
 *
 * @example
 * const token = await signSessionToken(secret, { sessionId, buyerId, orgId }, expiresAt);
 */
export async function signSessionToken(secret: Uint8Array, claims: SessionClaims, expiresAt: Date): Promise<string> {
  return new SignJWT({ org: claims.orgId })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setIssuer(ISSUER)
    .setSubject(claims.buyerId)
    .setJti(claims.sessionId)
    .setIssuedAt()
    .setExpirationTime(Math.floor(expiresAt.getTime() / 1000))
    .sign(secret);
}

/** The claims of a valid, unexpired token signed with `secret`, or undefined. Never throws. */
export async function verifySessionToken(secret: Uint8Array, token: string): Promise<SessionClaims | undefined> {
  try {
    const { payload } = await jwtVerify(token, secret, { issuer: ISSUER, algorithms: ['HS256'] });
    if (typeof payload.jti !== 'string' || typeof payload.sub !== 'string' || typeof payload.org !== 'string')
      return undefined;
    return { sessionId: payload.jti, buyerId: payload.sub, orgId: payload.org };
  } catch {
    return undefined;
  }
}
