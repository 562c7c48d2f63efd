import type { UpstreamStream } from './upstream-http.js';

/** One Server-Sent Event: its `event` field (default `message`) and its data lines joined by `\n`. */
export interface SseEvent {
  event: string;
  data: string;
}

export interface SseParser {
  /** Feed decoded text; chunks may split lines, CRLF pairs and events anywhere. */
  push(text: string): void;
  /** End of stream: dispatches a last event that lacked its blank line (lenient; see below). */
  end(): void;
}

/**
 * An incremental parser for the `text/event-stream` format (WHATWG HTML, "Server-sent events"):
 * lines end in LF, CR or CRLF; a blank line dispatches the event; lines starting with `:` are
 * comments; `data` lines accumulate; `id` and `retry` are ignored. Unlike the standard, an event
 * still pending when the stream ends is dispatched, so an upstream that closes right after
 * `data: [DONE]` without the final blank line is not misread as a dropped connection.
 *
 * @example
 * const events: SseEvent[] = [];
 * const parser = createSseParser((e) => events.push(e));
 * parser.push('data: {"a":1}\r\n\r\ndata: [DO');
 * parser.push('NE]\n\n');
 * events.map((e) => e.data); // ['{"a":1}', '[DONE]']
 */
export function createSseParser(onEvent: (event: SseEvent) => void): SseParser {
  let buffer = '';
  let data: string[] = [];
  let eventName = '';
  // A chunk ending in CR may be half of a CRLF; the LF starting the next chunk is then skipped.
  let skipLeadingLf = false;

  const dispatch = (): void => {
    if (data.length > 0) onEvent({ event: eventName || 'message', data: data.join('\n') });
    data = [];
    eventName = '';
  };

  const line = (text: string): void => {
    if (text === '') return dispatch();
    if (text.startsWith(':')) return;
    const colon = text.indexOf(':');
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
    else if (field === 'event') eventName = value;
  };

  return {
    push(text) {
      if (text === '') return;
      if (skipLeadingLf && text.startsWith('\n')) text = text.slice(1);
      skipLeadingLf = false;
      buffer += text;
      let start = 0;
      for (let i = 0; i < buffer.length; i++) {
        const ch = buffer[i];
        if (ch !== '\n' && ch !== '\r') continue;
        line(buffer.slice(start, i));
        if (ch === '\r') {
          if (i + 1 < buffer.length) {
            if (buffer[i + 1] === '\n') i++;
          } else {
            skipLeadingLf = true;
          }
        }
        start = i + 1;
      }
      buffer = buffer.slice(start);
    },
    end() {
      if (buffer !== '') line(buffer);
      buffer = '';
      dispatch();
    },
  };
}

/**
 * Reads a streamed body as SSE, calling `onEvent` per event as soon as its blank line arrives;
 * `onEvent` returns `false` to stop reading (after `[DONE]`). `read` feeds the body's pieces
 * (UpstreamStream's `read`: what is left of the body after a stop is its business). Resolves when
 * the body ends or `onEvent` stopped; rejects when reading fails or `onEvent` throws.
 *
 * @example
 * await readSse(upstream.read, ({ data }) => data !== '[DONE]');
 */
export async function readSse(
  read: UpstreamStream['read'],
  onEvent: (event: SseEvent) => boolean | void,
): Promise<void> {
  let stopped = false;
  const parser = createSseParser((event) => {
    if (!stopped && onEvent(event) === false) stopped = true;
  });
  const decoder = new TextDecoder();
  await read((chunk) => {
    parser.push(decoder.decode(chunk, { stream: true }));
    return !stopped;
  });
  if (!stopped) {
    parser.push(decoder.decode());
    parser.end();
  }
}
