import { useCallback, useEffect, useRef, useState } from 'preact/hooks';

export interface AsyncState<T> {
  data: T | undefined;
  error: Error | undefined;
  loading: boolean;
  /** Loads again, keeping the current data on screen meanwhile. */
  reload: () => void;
}

/**
 * Runs `load` when `deps` change (and every `pollMs` if given), cancelling a stale run.
 *
 * @example
 * const balance = useAsync((signal) => api<Balance>('/api/v1/billing/balance', { signal }), []);
 */
export function useAsync<T>(
  load: (signal: AbortSignal) => Promise<T>,
  deps: unknown[],
  options: { pollMs?: number } = {},
): AsyncState<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<Error | undefined>(undefined);
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  useEffect(() => {
    const controller = new AbortController();
    setLoading(true);
    loadRef.current(controller.signal).then(
      (value) => {
        if (controller.signal.aborted) return;
        setData(value);
        setError(undefined);
        setLoading(false);
      },
      (err: unknown) => {
        if (controller.signal.aborted) return;
        setError(err instanceof Error ? err : new Error(String(err)));
        setLoading(false);
      },
    );
    return () => controller.abort();
    // The caller names the dependencies, as with useEffect.
  }, [...deps, tick]);
  useEffect(() => {
    if (!options.pollMs) return undefined;
    const timer = setInterval(() => setTick((t) => t + 1), options.pollMs);
    return () => clearInterval(timer);
  }, [options.pollMs]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data, error, loading, reload };
}

/** A form action's state: busy while it runs, its error, and a message once it succeeded. */
export function useAction<A extends unknown[]>(action: (...args: A) => Promise<string | void>) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<Error | undefined>(undefined);
  const [done, setDone] = useState<string | undefined>(undefined);
  const run = async (...args: A) => {
    setBusy(true);
    setError(undefined);
    setDone(undefined);
    try {
      const message = await action(...args);
      if (message) setDone(message);
    } catch (err) {
      setError(err instanceof Error ? err : new Error(String(err)));
    } finally {
      setBusy(false);
    }
  };
  return { run, busy, error, done, clear: () => (setError(undefined), setDone(undefined)) };
}

/**
 * `useAction` for a form: `onSubmit` stops the page reload and hands the action the form's data.
 *
 * @example
 * const save = useFormAction(async (data) => { await api('/x', { body: { name: data.get('name') } }); });
 * <form onSubmit={save.onSubmit}>...</form>
 */
export function useFormAction(action: (data: FormData, form: HTMLFormElement) => Promise<string | void>) {
  const state = useAction(action);
  const onSubmit = (event: Event) => {
    event.preventDefault();
    const form = event.currentTarget as HTMLFormElement;
    void state.run(new FormData(form), form);
  };
  return { ...state, onSubmit };
}

/** A form field's value as trimmed text ('' when absent). */
export function text(data: FormData, name: string): string {
  return String(data.get(name) ?? '').trim();
}
