/**
 * Reads the gateway's Server-Sent Events (OpenAI's chat.completion.chunk stream, docs/gateway.md).
 * Pure apart from the stream it is handed: tested without a browser.
 */

export interface ServedBy {
  node_id: string;
  gpu_model: string;
  region: string;
  country: string;
}

export interface ChatChunk {
  id?: string;
  choices?: { delta?: { role?: string; content?: string }; finish_reason?: string | null }[];
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
  svc_node?: ServedBy;
  svc_receipt_id?: string;
  /** OpenAI's error envelope, the stream's last event after a failure mid-stream (docs/errors.md). */
  error?: { message: string; type?: string; param?: string | null; code?: string | number };
}

/**
 * Splits SSE text into the `data:` payloads of complete events; returns them and the unfinished
 * rest to prepend to the next piece.
 *
 * @example
 * splitEvents('data: {"a":1}\n\ndata: [DO') // { events: ['{"a":1}'], rest: 'data: [DO' }
 */
export function splitEvents(buffer: string): { events: string[]; rest: string } {
  const normalized = buffer.replace(/\r\n/g, '\n');
  const parts = normalized.split('\n\n');
  const rest = parts.pop() ?? '';
  const events = parts
    .map((block) =>
      block
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).replace(/^ /, ''))
        .join('\n'),
    )
    .filter((data) => data !== '');
  return { events, rest };
}

/** Yields each chunk of a chat stream until `[DONE]`. */
export async function* readChatStream(body: ReadableStream<Uint8Array>): AsyncGenerator<ChatChunk> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      const { events, rest } = splitEvents(buffer);
      buffer = rest;
      for (const data of events) {
        if (data === '[DONE]') return;
        yield JSON.parse(data) as ChatChunk;
      }
    }
  } finally {
    reader.releaseLock();
  }
}
