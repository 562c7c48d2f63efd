import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api';
import { useSignIn } from '../session-context';
import { Button, CopyButton, ErrorNotice, Field, Page } from '../components/ui';
import { text, useFormAction } from '../hooks';
import { Link } from '../router';
import { sessionFromAuth } from '../session';
import type { AuthResponse } from '../types';

function AuthFrame(props: { title: string; intro?: ComponentChildren; children: ComponentChildren }) {
  return (
    <main id="main" class="auth" tabIndex={-1}>
      <p class="brand">SVC</p>
      <div class="card">
        <Page title={props.title} intro={props.intro}>
          {props.children}
        </Page>
      </div>
    </main>
  );
}

export function LoginPage(props: { next: string }) {
  const signIn = useSignIn();
  const action = useFormAction(async (data) => {
    const body = await api<AuthResponse>('/api/v1/auth/login', {
      body: { email: text(data, 'email'), password: String(data.get('password') ?? '') },
      anonymous: true,
    });
    signIn(sessionFromAuth(body), props.next === '/login' ? '/' : props.next);
  });
  return (
    <AuthFrame title="Log in" intro="Your marketplace, gateway, keys and receipts.">
      <form onSubmit={action.onSubmit}>
        <Field label="Email">
          {(id) => <input id={id} name="email" type="email" autoComplete="username" required />}
        </Field>
        <Field label="Password">
          {(id) => <input id={id} name="password" type="password" autoComplete="current-password" required />}
        </Field>
        <ErrorNotice error={action.error} prefix="Could not log in" />
        <Button type="submit" variant="primary" busy={action.busy}>
          Log in
        </Button>
      </form>
      <p>
        No account yet? <Link href="/signup">Sign up</Link>
      </p>
    </AuthFrame>
  );
}

export function SignupPage() {
  const signIn = useSignIn();
  const [created, setCreated] = useState<AuthResponse | undefined>(undefined);
  const action = useFormAction(async (data) => {
    const name = text(data, 'name');
    const body = await api<AuthResponse>('/api/v1/auth/signup', {
      body: { email: text(data, 'email'), password: String(data.get('password') ?? ''), ...(name ? { name } : {}) },
      anonymous: true,
    });
    setCreated(body);
  });
  if (created) {
    return (
      <AuthFrame
        title="Your account is ready"
        intro={`${created.organization.name} has its free-tier credits. This is its first API key, with scope buyer.`}
      >
        {created.api_key && (
          <div class="secret" data-testid="first-key">
            <p>
              <strong>Copy it now: it is shown this once.</strong> You can create and revoke keys under API keys.
            </p>
            <code class="key">{created.api_key}</code>
            <CopyButton text={created.api_key} label="Copy the API key" />
          </div>
        )}
        <Button variant="primary" onClick={() => signIn(sessionFromAuth(created), '/')}>
          Continue to the dashboard
        </Button>
      </AuthFrame>
    );
  }
  return (
    <AuthFrame title="Sign up" intro="An account comes with an organization, an API key and free credits.">
      <form onSubmit={action.onSubmit}>
        <Field label="Name (optional)">
          {(id) => <input id={id} name="name" autoComplete="name" maxLength={200} />}
        </Field>
        <Field label="Email">{(id) => <input id={id} name="email" type="email" autoComplete="email" required />}</Field>
        <Field label="Password" hint="At least 10 characters.">
          {(id, hint) => (
            <input
              id={id}
              name="password"
              type="password"
              autoComplete="new-password"
              minLength={10}
              required
              aria-describedby={hint}
            />
          )}
        </Field>
        <ErrorNotice error={action.error} prefix="Could not sign up" />
        <Button type="submit" variant="primary" busy={action.busy}>
          Create account
        </Button>
      </form>
      <p>
        Already have an account? <Link href="/login">Log in</Link>
      </p>
    </AuthFrame>
  );
}

/** Opened from an invite's `accept_url` (`/invite?token=...`). */
export function InvitePage(props: { token: string }) {
  const signIn = useSignIn();
  // The token is a one-use secret: take it out of the address bar and the history at once.
  const [token] = useState(props.token);
  useEffect(() => {
    if (window.location.search) window.history.replaceState(null, '', '/invite');
  }, []);
  const action = useFormAction(async (data) => {
    const name = text(data, 'name');
    const body = await api<AuthResponse>('/api/v1/organizations/invites/accept', {
      body: { token, password: String(data.get('password') ?? ''), ...(name ? { name } : {}) },
      anonymous: true,
    });
    signIn(sessionFromAuth(body), '/organization');
  });
  if (!token) {
    return (
      <AuthFrame title="Accept an invite">
        <p>This link has no invite token. Open the full link from your invitation, or ask for a new one.</p>
      </AuthFrame>
    );
  }
  return (
    <AuthFrame
      title="Accept an invite"
      intro="Join the organization that invited you. New here? Choose a password. Already have an account with the invited email? Enter its password."
    >
      <form onSubmit={action.onSubmit}>
        <Field label="Name (optional)">
          {(id) => <input id={id} name="name" autoComplete="name" maxLength={200} />}
        </Field>
        <Field label="Password" hint="At least 10 characters for a new account.">
          {(id, hint) => (
            <input
              id={id}
              name="password"
              type="password"
              autoComplete="new-password"
              required
              aria-describedby={hint}
            />
          )}
        </Field>
        <ErrorNotice error={action.error} prefix="Could not accept the invite" />
        <Button type="submit" variant="primary" busy={action.busy}>
          Join the organization
        </Button>
      </form>
    </AuthFrame>
  );
}
