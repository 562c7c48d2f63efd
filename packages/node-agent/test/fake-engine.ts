/** A fake Engine for agent tests: deterministic answers, controllable delays. Tests only. */
import { sleep } from '../src/backoff.js';
import type { CallOptions, ChatRequest, Engine, EngineError, ImageRequest } from '../src/engines/interface.js';

export interface FakeEngine extends Engine {
  /** Calls now running, and the most ever running at once. */
  readonly inFlight: number;
  readonly maxInFlight: number;
  /** Every call, in order: `chat:<content>`, `embed`, `transcribe`, `image:<prompt>`. */
  readonly calls: string[];
  /** Signals of calls that were aborted. */
  readonly aborted: number;
}

export interface FakeEngineOptions {
  name?: string;
  models: string[];
  /** Each call takes this long (abortable). */
  delayMs?: number;
  /** Each call waits until aborted: a job that never finishes by itself. */
  block?: boolean;
  /** Thrown by every call. */
  error?: EngineError;
}

/**
 * A fake engine: chat answers `echo:<last message>` with usage (words, 3); embed returns
 * `[length, index]`; transcribe reports 2.3 s; images are 8 fixed bytes per call.
 *
 * @example
 * const engine = createFakeEngine({ models: ['tinyllama'], delayMs: 50 });
 */
export function createFakeEngine(options: FakeEngineOptions): FakeEngine {
  let inFlight = 0;
  let maxInFlight = 0;
  let aborted = 0;
  const calls: string[] = [];
  async function call<T>(label: string, signal: AbortSignal | undefined, answer: () => T): Promise<T> {
    calls.push(label);
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    try {
      if (options.block) await sleep(3_600_000, signal);
      else if (options.delayMs) await sleep(options.delayMs, signal);
      if (options.error) throw options.error;
      return answer();
    } catch (err) {
      if (signal?.aborted) aborted++;
      throw err;
    } finally {
      inFlight--;
    }
  }
  return {
    name: options.name ?? 'fake',
    get inFlight() {
      return inFlight;
    },
    get maxInFlight() {
      return maxInFlight;
    },
    get aborted() {
      return aborted;
    },
    calls,
    models: () => options.models,
    chat: (request: ChatRequest, o?: CallOptions) => {
      const last = request.messages.at(-1)?.content ?? '';
      return call(`chat:${last}`, o?.signal, () => ({
        content: `echo:${last}`,
        finish_reason: 'stop',
        usage: { prompt_tokens: last.split(/\s+/).filter(Boolean).length, completion_tokens: 3 },
      }));
    },
    embed: (request, o) =>
      call('embed', o?.signal, () => ({
        embeddings: request.input.map((text, i) => [text.length, i]),
        prompt_tokens: request.input.length * 2,
      })),
    transcribe: (request, o) =>
      call('transcribe', o?.signal, () => ({
        text: `heard ${request.audio.length} bytes`,
        language: 'en',
        duration: 2.3,
        segments: [],
      })),
    generateImage: (request: ImageRequest, o?: CallOptions) =>
      call(`image:${request.prompt}`, o?.signal, () => ({
        images: [{ bytes: Buffer.from('89504e470d0a1a0a', 'hex'), content_type: 'image/png' }],
      })),
    close: async () => undefined,
  };
}
