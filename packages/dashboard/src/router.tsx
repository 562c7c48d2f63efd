import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';

/** The current location as the app routes on it. */
export interface Location {
  path: string;
  query: URLSearchParams;
}

const listeners = new Set<() => void>();
let navigated = false;

/**
 * True once the app has moved between pages. On the first load focus stays at the top of the
 * document (so Tab reaches the skip link first); after a navigation the new page's heading takes it.
 */
export function hasNavigated(): boolean {
  return navigated;
}

function read(): Location {
  return {
    path: window.location.pathname.replace(/\/+$/, '') || '/',
    query: new URLSearchParams(window.location.search),
  };
}

/** Goes to a page of the app without a reload (`replace` keeps the history entry). */
export function navigate(to: string, options: { replace?: boolean } = {}): void {
  navigated = true;
  if (options.replace) window.history.replaceState(null, '', to);
  else window.history.pushState(null, '', to);
  for (const listener of listeners) listener();
}

/** The location, re-rendering on navigation and on the browser's back and forward buttons. */
export function useLocation(): Location {
  const [location, setLocation] = useState(read);
  useEffect(() => {
    const update = () => setLocation(read());
    const onPop = () => {
      navigated = true;
      update();
    };
    listeners.add(update);
    window.addEventListener('popstate', onPop);
    return () => {
      listeners.delete(update);
      window.removeEventListener('popstate', onPop);
    };
  }, []);
  return location;
}

/**
 * Matches `path` against a pattern with `:name` segments.
 *
 * @example
 * match('/jobs/:id', '/jobs/job_1') // { id: 'job_1' }
 */
export function match(pattern: string, path: string): Record<string, string> | undefined {
  const want = pattern.split('/');
  const got = path.split('/');
  if (want.length !== got.length) return undefined;
  const params: Record<string, string> = {};
  for (const [i, part] of want.entries()) {
    const value = got[i] ?? '';
    if (part.startsWith(':')) params[part.slice(1)] = decodeURIComponent(value);
    else if (part !== value) return undefined;
  }
  return params;
}

/** An in-app link: a real `<a href>` (open in a new tab works), routed without a reload. */
export function Link(props: {
  href: string;
  children: ComponentChildren;
  class?: string;
  'aria-current'?: 'page' | undefined;
}) {
  const { href, children, ...rest } = props;
  const onClick = (event: MouseEvent) => {
    if (
      event.defaultPrevented ||
      event.button !== 0 ||
      event.metaKey ||
      event.ctrlKey ||
      event.shiftKey ||
      event.altKey
    )
      return;
    event.preventDefault();
    navigate(href);
  };
  return (
    <a href={href} onClick={onClick} {...rest}>
      {children}
    </a>
  );
}
