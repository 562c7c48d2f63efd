import type { ButtonHTMLAttributes, ComponentChildren } from 'preact';
import { useId, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from '../api';
import { hasNavigated } from '../router';

/**
 * A page: its `<h1>` takes focus when the app navigates to it (screen readers announce it, the
 * next Tab starts from it), and the window title follows. Both happen in the commit that puts
 * the page in the document (a layout effect), so the page never shows with focus left behind.
 */
export function Page(props: {
  title: string;
  intro?: ComponentChildren;
  actions?: ComponentChildren;
  children?: ComponentChildren;
}) {
  const heading = useRef<HTMLHeadingElement>(null);
  useLayoutEffect(() => {
    document.title = `${props.title} · SVC`;
    if (hasNavigated()) heading.current?.focus({ preventScroll: true });
  }, [props.title]);
  return (
    <>
      <header class="page-head">
        <div>
          <h1 tabIndex={-1} ref={heading}>
            {props.title}
          </h1>
          {props.intro && <p class="intro">{props.intro}</p>}
        </div>
        {props.actions && <div class="actions">{props.actions}</div>}
      </header>
      {props.children}
    </>
  );
}

export function Section(props: {
  title: string;
  id?: string;
  children: ComponentChildren;
  actions?: ComponentChildren;
}) {
  const fallback = useId();
  const id = props.id ?? fallback;
  return (
    <section class="card" aria-labelledby={id}>
      <div class="card-head">
        <h2 id={id}>{props.title}</h2>
        {props.actions}
      </div>
      {props.children}
    </section>
  );
}

/** An error as a sentence, with the API's stable error string for support. */
export function ErrorNotice(props: { error: Error | undefined; prefix?: string }) {
  if (!props.error) return null;
  const e = props.error;
  const code = e instanceof ApiError && e.code !== 'network' ? ` (${e.code})` : '';
  return (
    <p class="notice error" role="alert">
      {props.prefix ? `${props.prefix}: ` : ''}
      {e.message}
      {code}
    </p>
  );
}

/** A polite live region for results of actions. */
export function Done(props: { message: string | undefined }) {
  return (
    <p class="notice success" role="status" hidden={!props.message}>
      {props.message}
    </p>
  );
}

export function Loading(props: { what: string }) {
  return (
    <p class="muted" role="status">
      Loading {props.what}…
    </p>
  );
}

/** A labelled form control: the label is always visible and tied to its input. */
export function Field(props: {
  label: string;
  hint?: string;
  children: (id: string, describedBy: string | undefined) => ComponentChildren;
}) {
  const id = useId();
  const hintId = props.hint ? `${id}-hint` : undefined;
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      {props.children(id, hintId)}
      {props.hint && (
        <small id={hintId} class="muted">
          {props.hint}
        </small>
      )}
    </div>
  );
}

export function Button(
  props: ButtonHTMLAttributes<HTMLButtonElement> & { busy?: boolean; variant?: 'primary' | 'danger' | 'plain' },
) {
  const { busy, variant = 'plain', children, disabled, type, ...rest } = props;
  return (
    <button
      type={type ?? 'button'}
      class={`btn ${variant}`}
      disabled={Boolean(disabled) || busy}
      aria-busy={busy ? 'true' : undefined}
      {...rest}
    >
      {children}
    </button>
  );
}

/** Copies text to the clipboard and says so in a live region. */
export function CopyButton(props: { text: string; label: string }) {
  const [said, setSaid] = useState('');
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(props.text);
      setSaid('Copied to the clipboard.');
    } catch {
      setSaid('Copying was refused by the browser: select the text and copy it by hand.');
    }
  };
  return (
    <span class="copy">
      <Button onClick={() => void copy()} aria-label={props.label}>
        Copy
      </Button>
      <span role="status" class="muted small">
        {said}
      </span>
    </span>
  );
}

/** Previous / next over an offset-paged list, with the range shown. */
export function Pager(props: {
  offset: number;
  limit: number;
  total: number;
  shown: number;
  onChange: (offset: number) => void;
  what: string;
}) {
  const { offset, limit, total, shown } = props;
  if (total === 0) return null;
  return (
    <nav class="pager" aria-label={`${props.what} pages`}>
      <Button onClick={() => props.onChange(Math.max(0, offset - limit))} disabled={offset === 0}>
        Previous
      </Button>
      <span aria-live="polite">
        {offset + 1}–{offset + shown} of {total}
      </span>
      <Button onClick={() => props.onChange(offset + limit)} disabled={offset + shown >= total}>
        Next
      </Button>
    </nav>
  );
}

const STATUS_TONE: Record<string, string> = {
  completed: 'good',
  online: 'good',
  available: 'good',
  verified: 'good',
  active: 'good',
  failed: 'bad',
  offline: 'bad',
  revoked: 'bad',
  cancelled: 'muted',
  timeout: 'bad',
  busy: 'warn',
};

export function Status(props: { value: string }) {
  return <span class={`badge ${STATUS_TONE[props.value] ?? 'info'}`}>{props.value}</span>;
}

/** A figure with its label, for the summary rows at the top of pages. */
export function Stat(props: { label: string; value: ComponentChildren; note?: ComponentChildren }) {
  return (
    <div class="stat">
      <dt>{props.label}</dt>
      <dd>
        <span class="stat-value">{props.value}</span>
        {props.note && <span class="muted small">{props.note}</span>}
      </dd>
    </div>
  );
}

export function Empty(props: { children: ComponentChildren }) {
  return <p class="empty muted">{props.children}</p>;
}

/** A table column: its header text, right-aligned numbers, or a header read only by screen readers. */
export type Column = string | { label: string; numeric?: boolean; srOnly?: boolean };

/**
 * A data table with a caption for screen readers and column headers; the rows are the children.
 * Wide tables scroll sideways inside their panel rather than the page.
 */
export function DataTable(props: { caption: string; columns: Column[]; testId?: string; children: ComponentChildren }) {
  return (
    <div class="table-wrap">
      <table data-testid={props.testId}>
        <caption class="sr-only">{props.caption}</caption>
        <thead>
          <tr>
            {props.columns.map((c) => {
              const col = typeof c === 'string' ? { label: c } : c;
              return (
                <th key={col.label} scope="col" class={col.numeric ? 'num' : undefined}>
                  {col.srOnly ? <span class="sr-only">{col.label}</span> : col.label}
                </th>
              );
            })}
          </tr>
        </thead>
        <tbody>{props.children}</tbody>
      </table>
    </div>
  );
}
