import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import type { Session } from './session';

/**
 * The signed-in session, provided by `App` and read by the pages. Its own file so that the pages
 * need not import `app.tsx`, which imports them (no import cycle).
 */
export interface SessionState {
  session: Session | undefined;
  /** Stores a new session (after log-in, sign-up, invite) and goes to `to`. */
  signIn: (session: Session, to?: string) => void;
  signOut: () => Promise<void>;
}

export const SessionContext = createContext<SessionState>({
  session: undefined,
  signIn: () => undefined,
  signOut: async () => undefined,
});

export function useSession(): SessionState & { session: Session } {
  const state = useContext(SessionContext);
  if (!state.session) throw new Error('useSession outside a signed-in page');
  return { ...state, session: state.session };
}

export function useSignIn(): SessionState['signIn'] {
  return useContext(SessionContext).signIn;
}
