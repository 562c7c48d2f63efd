/**
 * The signed-in person's session token. Kept in sessionStorage (this tab only, gone when it
 * closes), never in a URL or a cookie; memory alone when storage is unavailable.
 */
const KEY = 'svc.session';

export interface Session {
  token: string;
  buyerId: string;
  email: string;
  name: string;
  organization: { id: string; name: string; role: 'owner' | 'admin' | 'member' };
}

let memory: Session | undefined;

function storage(): Storage | undefined {
  try {
    return globalThis.sessionStorage;
  } catch {
    return undefined;
  }
}

export function currentSession(): Session | undefined {
  if (memory) return memory;
  const raw = storage()?.getItem(KEY);
  if (!raw) return undefined;
  try {
    memory = JSON.parse(raw) as Session;
    return memory;
  } catch {
    return undefined;
  }
}

export function sessionToken(): string | undefined {
  return currentSession()?.token;
}

export function saveSession(session: Session): void {
  memory = session;
  try {
    storage()?.setItem(KEY, JSON.stringify(session));
  } catch {
    // storage full or disabled: memory still holds it for this page
  }
}

export function clearSession(): void {
  memory = undefined;
  try {
    storage()?.removeItem(KEY);
  } catch {
    // nothing stored
  }
}

/** The AuthResponse of sign-up, log-in and invite acceptance, as a Session. */
export function sessionFromAuth(body: {
  token: string;
  buyer_id: string;
  email: string;
  name: string;
  organization: { id: string; name: string; role: 'owner' | 'admin' | 'member' };
}): Session {
  return {
    token: body.token,
    buyerId: body.buyer_id,
    email: body.email,
    name: body.name,
    organization: { id: body.organization.id, name: body.organization.name, role: body.organization.role },
  };
}
