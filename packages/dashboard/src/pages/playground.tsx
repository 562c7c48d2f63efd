import { useRef, useState } from 'preact/hooks';
import { api, request } from '../api';
import { Button, ErrorNotice, Field, Page, Section } from '../components/ui';
import { short } from '../format';
import { useAsync } from '../hooks';
import { readChatStream, type ServedBy } from '../sse';
import type { Model, Receipt } from '../types';

interface Turn {
  role: 'user' | 'assistant';
  content: string;
  /** For answers: the completion, the node that served it and the receipt it signed. */
  completionId?: string;
  servedBy?: ServedBy;
  receiptId?: string;
  usage?: { prompt_tokens: number; completion_tokens: number };
  error?: string;
  streaming?: boolean;
}

function ReceiptDetails(props: { completionId: string }) {
  const receipt = useAsync(
    (signal) => api<{ receipts: Receipt[] }>(`/api/v1/job/receipts/${props.completionId}`, { signal }),
    [props.completionId],
  );
  const r = receipt.data?.receipts[0];
  if (receipt.error) return <ErrorNotice error={receipt.error} />;
  if (!r) return <p class="muted small">Loading the receipt…</p>;
  return (
    <dl class="kv small">
      <dt>Signed by node key</dt>
      <dd>
        <code title={r.node_public_key}>{short(r.node_public_key, 12)}</code>
      </dd>
      <dt>Result hash</dt>
      <dd>
        <code title={r.result_hash}>{short(r.result_hash, 12)}</code>
      </dd>
      <dt>Units</dt>
      <dd>{r.metering_units} tokens</dd>
      <dt>Signature</dt>
      <dd>
        <code title={r.signature}>{short(r.signature, 12)}</code> ({r.signature_version})
      </dd>
    </dl>
  );
}

function Answer(props: { turn: Turn }) {
  const t = props.turn;
  return (
    <div class="turn assistant" data-testid="answer">
      <p class="who">Assistant</p>
      <p class="content" aria-busy={t.streaming ? 'true' : undefined}>
        {t.content}
        {t.streaming && <span class="cursor" aria-hidden="true" />}
      </p>
      {t.error && (
        <p class="notice error" role="alert">
          {t.error}
        </p>
      )}
      {(t.servedBy ?? t.receiptId) && (
        <div class="served" data-testid="served-by">
          {t.servedBy && (
            <span>
              Served by <code>{t.servedBy.node_id}</code> in{' '}
              <strong data-testid="served-country">{t.servedBy.country || 'an undeclared country'}</strong>
              {t.servedBy.gpu_model && ` on ${t.servedBy.gpu_model}`}
            </span>
          )}
          {t.receiptId && (
            <details>
              <summary>
                Receipt <code data-testid="receipt-id">{t.receiptId}</code>
              </summary>
              {t.completionId && <ReceiptDetails completionId={t.completionId} />}
            </details>
          )}
          {t.usage && (
            <span class="muted small">
              {t.usage.prompt_tokens} prompt + {t.usage.completion_tokens} completion tokens
            </span>
          )}
        </div>
      )}
    </div>
  );
}

export function PlaygroundPage() {
  const models = useAsync((signal) => api<{ data: Model[] }>('/v1/models', { signal }), []);
  const chatModels = (models.data?.data ?? []).filter((m) => m.type === 'chat');
  const [turns, setTurns] = useState<Turn[]>([]);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<Error | undefined>(undefined);
  const abort = useRef<AbortController | undefined>(undefined);

  const update = (index: number, patch: Partial<Turn>) =>
    setTurns((all) => all.map((t, i) => (i === index ? { ...t, ...patch, content: patch.content ?? t.content } : t)));

  const send = async (form: HTMLFormElement) => {
    const data = new FormData(form);
    const prompt = String(data.get('prompt') ?? '').trim();
    if (!prompt) return;
    const country = String(data.get('country') ?? '')
      .trim()
      .toUpperCase();
    const pin = String(data.get('pin') ?? 'strict');
    const history = [
      ...turns.filter((t) => !t.error).map((t) => ({ role: t.role, content: t.content })),
      { role: 'user' as const, content: prompt },
    ];
    const index = turns.length + 1;
    setTurns([...turns, { role: 'user', content: prompt }, { role: 'assistant', content: '', streaming: true }]);
    (form.elements.namedItem('prompt') as HTMLTextAreaElement).value = '';
    setBusy(true);
    setError(undefined);
    abort.current = new AbortController();
    let content = '';
    try {
      const res = await request('/v1/chat/completions', {
        body: {
          model: String(data.get('model')),
          messages: history,
          stream: true,
          stream_options: { include_usage: true },
          ...(country ? { [pin === 'strict' ? 'strict_jurisdiction' : 'jurisdiction']: country } : {}),
        },
        signal: abort.current.signal,
      });
      if (!res.body) throw new Error('the browser gave no stream');
      for await (const chunk of readChatStream(res.body)) {
        if (chunk.error) {
          update(index, { error: `The node failed mid-answer: ${chunk.error.message}` });
          continue;
        }
        content += chunk.choices?.[0]?.delta?.content ?? '';
        update(index, {
          content,
          ...(chunk.id ? { completionId: chunk.id } : {}),
          ...(chunk.svc_node ? { servedBy: chunk.svc_node } : {}),
          ...(chunk.svc_receipt_id ? { receiptId: chunk.svc_receipt_id } : {}),
          ...(chunk.usage ? { usage: chunk.usage } : {}),
        });
      }
      update(index, { streaming: false });
    } catch (err) {
      const stopped = (err as Error).name === 'AbortError';
      update(index, { streaming: false, ...(stopped ? { error: 'Stopped.' } : { error: (err as Error).message }) });
      if (!stopped) setError(err as Error);
    } finally {
      setBusy(false);
    }
  };

  return (
    <Page
      title="Playground"
      intro="Chat with the gateway. Each answer names the node and country that served it and the receipt it signed."
    >
      <Section title="Conversation">
        <div class="chat" aria-live="polite" aria-relevant="additions text" data-testid="chat">
          {turns.length === 0 && <p class="muted">Ask something to start. Answers stream as the node writes them.</p>}
          {turns.map((t, i) =>
            t.role === 'user' ? (
              <div class="turn user" key={i}>
                <p class="who">You</p>
                <p class="content">{t.content}</p>
              </div>
            ) : (
              <Answer key={i} turn={t} />
            ),
          )}
        </div>
        <form
          class="chat-form"
          onSubmit={(e) => {
            e.preventDefault();
            void send(e.currentTarget);
          }}
        >
          <div class="row-form">
            <Field label="Model">
              {(id) => (
                <select id={id} name="model" required>
                  {chatModels.map((m) => (
                    <option key={m.id} value={m.id}>
                      {m.id}
                    </option>
                  ))}
                </select>
              )}
            </Field>
            <Field label="Country (optional)" hint="ISO code, e.g. CA">
              {(id, hint) => (
                <input
                  id={id}
                  name="country"
                  maxLength={2}
                  pattern="[A-Za-z]{2}"
                  size={4}
                  aria-describedby={hint}
                  autoComplete="off"
                />
              )}
            </Field>
            <fieldset class="pin">
              <legend>Pin</legend>
              <label class="check">
                <input type="radio" name="pin" value="strict" defaultChecked /> require (strict)
              </label>
              <label class="check">
                <input type="radio" name="pin" value="prefer" /> prefer
              </label>
            </fieldset>
          </div>
          <Field label="Message">
            {(id) => (
              <textarea
                id={id}
                name="prompt"
                rows={3}
                required
                onKeyDown={(e) => {
                  if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) e.currentTarget.form?.requestSubmit();
                }}
              />
            )}
          </Field>
          <ErrorNotice error={error ?? models.error} />
          <div class="actions">
            <Button type="submit" variant="primary" busy={busy} disabled={chatModels.length === 0}>
              Send
            </Button>
            {busy && <Button onClick={() => abort.current?.abort()}>Stop</Button>}
            <span class="muted small">Ctrl+Enter sends.</span>
          </div>
        </form>
      </Section>
    </Page>
  );
}
