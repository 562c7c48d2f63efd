import { useContext, useEffect, useState } from 'preact/hooks';
import { api, onUnauthorized } from './api';
import { Link, match, navigate, useLocation } from './router';
import { clearSession, currentSession, saveSession, type Session } from './session';
import { SessionContext, type SessionState } from './session-context';
import { BillingPage } from './pages/billing';
import { PayoutsPage } from './pages/payouts';
import { EpochPage, SitePage, SitesPage } from './pages/capture';
import { InvitePage, LoginPage, SignupPage } from './pages/auth';
import { JobPage } from './pages/job';
import { JobsPage } from './pages/jobs';
import { KeysPage } from './pages/keys';
import { NodesPage } from './pages/nodes';
import { NotFoundPage } from './pages/not-found';
import { OrganizationPage } from './pages/organization';
import { OverviewPage } from './pages/overview';
import { PlaygroundPage } from './pages/playground';
import { SlaPage } from './pages/sla';
import { WorkOrderPage, WorkOrdersPage } from './pages/work-orders';

const NAV = [
  { href: '/', label: 'Overview' },
  { href: '/playground', label: 'Playground' },
  { href: '/jobs', label: 'Jobs' },
  { href: '/work-orders', label: 'Work orders' },
  { href: '/nodes', label: 'Nodes' },
  { href: '/capture', label: 'Capture' },
  { href: '/sla', label: 'SLA' },
  { href: '/billing', label: 'Billing' },
  { href: '/payouts', label: 'Payouts' },
  { href: '/keys', label: 'API keys' },
  { href: '/organization', label: 'Organization' },
];

const PAGES: { pattern: string; render: (params: Record<string, string>) => preact.JSX.Element }[] = [
  { pattern: '/', render: () => <OverviewPage /> },
  { pattern: '/playground', render: () => <PlaygroundPage /> },
  { pattern: '/jobs', render: () => <JobsPage /> },
  { pattern: '/jobs/:id', render: (p) => <JobPage id={p.id ?? ''} /> },
  { pattern: '/work-orders', render: () => <WorkOrdersPage /> },
  { pattern: '/work-orders/:id', render: (p) => <WorkOrderPage id={p.id ?? ''} /> },
  { pattern: '/nodes', render: () => <NodesPage /> },
  { pattern: '/capture', render: () => <SitesPage /> },
  { pattern: '/capture/sites/:id', render: (p) => <SitePage id={p.id ?? ''} /> },
  { pattern: '/capture/epochs/:id', render: (p) => <EpochPage id={p.id ?? ''} /> },
  { pattern: '/sla', render: () => <SlaPage /> },
  { pattern: '/billing', render: () => <BillingPage /> },
  { pattern: '/payouts', render: () => <PayoutsPage /> },
  { pattern: '/keys', render: () => <KeysPage /> },
  { pattern: '/organization', render: () => <OrganizationPage /> },
];

function isCurrent(href: string, path: string): boolean {
  return href === '/' ? path === '/' : path === href || path.startsWith(`${href}/`);
}

function Shell(props: { session: Session; path: string; children: preact.ComponentChildren }) {
  const { signOut } = useContext(SessionContext);
  const [menuOpen, setMenuOpen] = useState(false);
  useEffect(() => setMenuOpen(false), [props.path]);
  return (
    <div class="shell">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="topbar">
        <Link href="/" class="brand">
          SVC
        </Link>
        <button
          type="button"
          class="btn plain menu-toggle"
          aria-expanded={menuOpen ? 'true' : 'false'}
          aria-controls="nav"
          onClick={() => setMenuOpen(!menuOpen)}
        >
          Menu
        </button>
        <div class="who">
          <span>
            {props.session.organization.name} · <span class="muted">{props.session.organization.role}</span>
          </span>
          <span class="muted small">{props.session.email}</span>
          <button type="button" class="btn plain" onClick={() => void signOut()}>
            Log out
          </button>
        </div>
      </header>
      <div class="layout">
        <nav id="nav" aria-label="Main" class={menuOpen ? 'open' : ''}>
          <ul>
            {NAV.map((item) => (
              <li key={item.href}>
                <Link href={item.href} aria-current={isCurrent(item.href, props.path) ? 'page' : undefined}>
                  {item.label}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
        <main id="main" tabIndex={-1}>
          {props.children}
        </main>
      </div>
    </div>
  );
}

export function App() {
  const location = useLocation();
  const [session, setSession] = useState<Session | undefined>(currentSession);
  useEffect(
    () =>
      onUnauthorized(() => {
        setSession(undefined);
      }),
    [],
  );
  const state: SessionState = {
    session,
    signIn(next, to = '/') {
      saveSession(next);
      setSession(next);
      navigate(to, { replace: true });
    },
    async signOut() {
      try {
        await api('/api/v1/auth/logout', { method: 'POST' });
      } catch {
        // the session may already be gone; forget it here either way
      }
      clearSession();
      setSession(undefined);
      navigate('/login', { replace: true });
    },
  };

  const path = location.path;
  let content: preact.JSX.Element;
  if (path === '/invite') content = <InvitePage token={location.query.get('token') ?? ''} />;
  else if (path === '/signup') content = <SignupPage />;
  else if (!session || path === '/login')
    content = <LoginPage next={path === '/login' ? (location.query.get('next') ?? '/') : path} />;
  else {
    const page = PAGES.map((p) => ({ p, params: match(p.pattern, path) })).find((m) => m.params);
    content = (
      <Shell session={session} path={path}>
        {page?.params ? page.p.render(page.params) : <NotFoundPage />}
      </Shell>
    );
  }
  return <SessionContext.Provider value={state}>{content}</SessionContext.Provider>;
}
