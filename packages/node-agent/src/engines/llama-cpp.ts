import { findModel, type ChatField } from '@svc/protocol';
import {
  type CallOptions,
  type ChatMessage,
  type ChatRequest,
  type ChatResult,
  type EmbedRequest,
  type EmbedResult,
  type Engine,
  EngineError,
} from './interface.js';

/**
 * The part of node-llama-cpp (v3) this engine calls. The package is an optional dependency,
 * loaded at run time, so the agent builds and runs without it where it cannot install.
 */
interface NlcModule {
  getLlama(options: {
    build: 'never';
    gpu: 'auto' | false;
    skipDownload: true;
    progressLogs: false;
    logLevel: 'error';
    maxThreads?: number;
  }): Promise<NlcLlama>;
  LlamaChat: new (options: { contextSequence: NlcSequence }) => NlcChat;
}
interface NlcLlama {
  readonly cpuMathCores: number;
  createGrammarForJsonSchema(schema: object): Promise<NlcGrammar>;
  getGrammarFor(type: 'json'): Promise<NlcGrammar>;
  loadModel(options: { modelPath: string }): Promise<NlcModel>;
  dispose(): Promise<void>;
}
interface NlcModel {
  readonly trainContextSize: number;
  readonly embeddingVectorSize: number;
  createContext(options: { contextSize: number; threads: number }): Promise<NlcContext>;
  createEmbeddingContext(options: { contextSize: number; threads: number }): Promise<NlcEmbeddingContext>;
}
interface NlcContext {
  getSequence(): NlcSequence;
  dispose(): Promise<void>;
}
interface NlcSequence {
  readonly tokenMeter: { readonly usedInputTokens: number; readonly usedOutputTokens: number };
}
type NlcHistoryItem = { type: 'system' | 'user'; text: string } | { type: 'model'; response: string[] };
/** A grammar generation is held to (opaque here). */
type NlcGrammar = object;
/** The sampling options a chat request's fields map to (node-llama-cpp's names). */
interface NlcSampling {
  grammar?: NlcGrammar;
  customStopTriggers?: readonly string[];
  topP?: number;
  seed?: number;
  repeatPenalty?: { presencePenalty?: number; frequencyPenalty?: number };
}
interface NlcChat {
  generateResponse(
    history: NlcHistoryItem[],
    options: NlcSampling & {
      maxTokens: number;
      temperature: number;
      signal?: AbortSignal;
      onTextChunk: (text: string) => void;
    },
  ): Promise<{ response: string; metadata: { stopReason: string } }>;
  dispose(): void;
}
interface NlcEmbeddingContext {
  getEmbeddingFor(text: string): Promise<{ vector: readonly number[] }>;
  calculateInputLength(text: string): number;
  dispose(): Promise<void>;
}

export interface LlamaCppEngineOptions {
  /** Catalogue id -> path of a GGUF file; chat and embeddings catalogue models only. */
  models: ReadonlyMap<string, string>;
  /** CPU threads per evaluation; default the machine's math cores. */
  threads?: number;
  /** Use a GPU when node-llama-cpp ships a working binary for it (CUDA, Vulkan, Metal); default true. */
  gpu?: boolean;
  /** Context tokens per request; default the model's training context, capped to 4096. */
  contextSize?: number;
}

/**
 * The chat fields llama-cpp honours (docs/engines.md): `response_format` through a grammar (JSON,
 * or the request's JSON schema), `stop` as stop triggers, `top_p`, `seed`, the two penalties as
 * llama.cpp's (the same definitions as OpenAI's), and `user` (a label for the buyer's own
 * records: nothing in a local engine depends on it). Not tools, `logit_bias` (OpenAI's token ids
 * mean nothing to another vocabulary) or `n` above 1.
 */
export const LLAMA_CPP_CHAT_FIELDS: readonly ChatField[] = [
  'response_format',
  'stop',
  'top_p',
  'seed',
  'presence_penalty',
  'frequency_penalty',
  'user',
];

/** Grammars kept per JSON schema (building one costs more than a short generation). */
const GRAMMAR_CACHE_SIZE = 32;

/** Generated tokens when a chat request has no `max_tokens`. */
export const LLAMA_CPP_DEFAULT_MAX_TOKENS = 512;

// A variable specifier keeps TypeScript from requiring the optional package at build time.
const PACKAGE = 'node-llama-cpp';

async function loadNodeLlamaCpp(): Promise<NlcModule> {
  try {
    return (await import(PACKAGE)) as NlcModule;
  } catch (error) {
    throw new Error(
      `node-llama-cpp is not installed (optional dependency of @svc/node-agent): ${(error as Error).message}`,
    );
  }
}

/**
 * Whether node-llama-cpp and a prebuilt binary for this machine load, and if not why.
 *
 * @example
 * const probe = await probeLlamaCpp();
 * if (!probe.available) console.log(`no in-process llama.cpp: ${probe.reason}`);
 */
export async function probeLlamaCpp(): Promise<{ available: true } | { available: false; reason: string }> {
  try {
    const nlc = await loadNodeLlamaCpp();
    const llama = await nlc.getLlama({
      build: 'never',
      gpu: false,
      skipDownload: true,
      progressLogs: false,
      logLevel: 'error',
    });
    await llama.dispose();
    return { available: true };
  } catch (error) {
    return { available: false, reason: error instanceof Error ? error.message : String(error) };
  }
}

/** Runs tasks one at a time: a CPU model serves one generation faster than two interleaved. */
function createQueue(): <T>(task: () => Promise<T>) => Promise<T> {
  let tail: Promise<unknown> = Promise.resolve();
  return (task) => {
    const run = tail.then(task, task);
    tail = run.catch(() => undefined);
    return run;
  };
}

function toHistory(messages: readonly ChatMessage[]): NlcHistoryItem[] {
  // Tool turns never reach this engine (it declares no `tools`); a stray one reads as user text.
  const history: NlcHistoryItem[] = messages.map((m) =>
    m.role === 'assistant'
      ? { type: 'model', response: [m.content ?? ''] }
      : { type: m.role === 'tool' ? 'user' : m.role, text: m.content ?? '' },
  );
  history.push({ type: 'model', response: [] });
  return history;
}

interface LoadedModel {
  id: string;
  kind: 'chat' | 'embeddings';
  model: NlcModel;
  contextSize: number;
  queue: <T>(task: () => Promise<T>) => Promise<T>;
  embedding?: Promise<NlcEmbeddingContext>;
}

/**
 * An Engine running GGUF models in-process through node-llama-cpp's prebuilt llama.cpp
 * binaries (never built or downloaded at run time). Chat streams token by token; usage comes
 * from the model's tokenizer. Loads every model before resolving; requests to one model run one
 * at a time.
 *
 * @example
 * const engine = await createLlamaCppEngine({ models: new Map([['tinyllama', '/models/tinyllama.Q4_K_M.gguf']]) });
 */
export async function createLlamaCppEngine(options: LlamaCppEngineOptions): Promise<Engine> {
  const nlc = await loadNodeLlamaCpp();
  const llama = await nlc.getLlama({
    build: 'never',
    gpu: options.gpu === false ? false : 'auto',
    skipDownload: true,
    progressLogs: false,
    logLevel: 'error',
    ...(options.threads === undefined ? {} : { maxThreads: options.threads }),
  });
  const threads = options.threads ?? Math.max(1, llama.cpuMathCores);
  const loaded = new Map<string, LoadedModel>();
  try {
    for (const [id, path] of options.models) {
      const type = findModel(id)?.type;
      if (type !== 'chat' && type !== 'embeddings') {
        throw new EngineError(`${id}: llama-cpp serves chat and embeddings catalogue models only`, false);
      }
      const model = await llama.loadModel({ modelPath: path });
      const dimensions = findModel(id)?.dimensions;
      if (type === 'embeddings' && dimensions !== undefined && model.embeddingVectorSize !== dimensions) {
        throw new EngineError(
          `${path} embeds in ${model.embeddingVectorSize} dimensions; ${id} has ${dimensions}`,
          false,
        );
      }
      const contextSize = options.contextSize ?? Math.min(model.trainContextSize, 4096);
      loaded.set(id, { id, kind: type, model, contextSize, queue: createQueue() });
    }
  } catch (error) {
    await llama.dispose();
    throw error;
  }

  const grammars = new Map<string, Promise<NlcGrammar>>();
  /** The grammar of a `response_format`: JSON, or JSON of its schema; none for text. */
  function grammarFor(format: unknown): Promise<NlcGrammar> | undefined {
    const f = typeof format === 'object' && format !== null ? (format as Record<string, unknown>) : undefined;
    const schema = (f?.json_schema as { schema?: unknown } | undefined)?.schema;
    if (f?.type === 'json_schema' && typeof schema === 'object' && schema !== null) {
      const key = JSON.stringify(schema);
      let grammar = grammars.get(key);
      if (grammar === undefined) {
        grammar = llama.createGrammarForJsonSchema(schema);
        grammar.catch(() => grammars.delete(key));
        if (grammars.size >= GRAMMAR_CACHE_SIZE) grammars.delete(grammars.keys().next().value ?? '');
        grammars.set(key, grammar);
      }
      return grammar;
    }
    if (f?.type === 'json_object' || f?.type === 'json_schema') return llama.getGrammarFor('json');
    return undefined;
  }

  /** The request's fields as node-llama-cpp's sampling options. */
  async function samplingOf(fields: ChatRequest['fields']): Promise<NlcSampling> {
    if (fields === undefined) return {};
    const out: NlcSampling = {};
    const grammar = grammarFor(fields.response_format);
    if (grammar !== undefined) {
      out.grammar = await grammar.catch((error: unknown) => {
        throw new EngineError(
          `response_format: this JSON schema cannot be made a grammar: ${error instanceof Error ? error.message : String(error)}`,
          false,
        );
      });
    }
    const stop = fields.stop;
    if (typeof stop === 'string') out.customStopTriggers = [stop];
    else if (Array.isArray(stop)) out.customStopTriggers = stop.filter((s): s is string => typeof s === 'string');
    if (typeof fields.top_p === 'number') out.topP = fields.top_p;
    if (typeof fields.seed === 'number') out.seed = fields.seed;
    const presence = fields.presence_penalty;
    const frequency = fields.frequency_penalty;
    if (typeof presence === 'number' || typeof frequency === 'number')
      out.repeatPenalty = {
        ...(typeof presence === 'number' ? { presencePenalty: presence } : {}),
        ...(typeof frequency === 'number' ? { frequencyPenalty: frequency } : {}),
      };
    return out;
  }

  function modelFor(id: string, kind: LoadedModel['kind']): LoadedModel {
    const entry = loaded.get(id);
    if (entry === undefined || entry.kind !== kind)
      throw new EngineError(`model ${id} is not served by this engine`, true);
    return entry;
  }

  function failure(error: unknown, call: CallOptions): EngineError {
    if (error instanceof EngineError) return error;
    if (call.signal?.aborted) return new EngineError('request aborted by the caller', false);
    return new EngineError(`llama.cpp failed: ${error instanceof Error ? error.message : String(error)}`, true);
  }

  async function chat(request: ChatRequest, call: CallOptions = {}): Promise<ChatResult> {
    const entry = modelFor(request.model, 'chat');
    return entry.queue(async () => {
      if (call.signal?.aborted) throw failure(call.signal.reason, call);
      let context: NlcContext | undefined;
      try {
        // A fresh context per request: no state leaks between buyers, and the token meter
        // counts this request alone.
        context = await entry.model.createContext({ contextSize: entry.contextSize, threads });
        const sequence = context.getSequence();
        const session = new nlc.LlamaChat({ contextSequence: sequence });
        const answer = await session.generateResponse(toHistory(request.messages), {
          ...(await samplingOf(request.fields)),
          maxTokens: request.max_tokens ?? LLAMA_CPP_DEFAULT_MAX_TOKENS,
          temperature: request.temperature ?? 0.7,
          ...(call.signal === undefined ? {} : { signal: call.signal }),
          onTextChunk: (text) => {
            if (text !== '') call.onDelta?.(text);
          },
        });
        session.dispose();
        return {
          content: answer.response,
          finish_reason: answer.metadata.stopReason === 'maxTokens' ? 'length' : 'stop',
          usage: {
            prompt_tokens: sequence.tokenMeter.usedInputTokens,
            completion_tokens: sequence.tokenMeter.usedOutputTokens,
          },
        };
      } catch (error) {
        throw failure(error, call);
      } finally {
        await context?.dispose();
      }
    });
  }

  async function embed(request: EmbedRequest, call: CallOptions = {}): Promise<EmbedResult> {
    const entry = modelFor(request.model, 'embeddings');
    return entry.queue(async () => {
      try {
        entry.embedding ??= entry.model.createEmbeddingContext({ contextSize: entry.contextSize, threads });
        const context = await entry.embedding.catch((error: unknown) => {
          entry.embedding = undefined; // let the next request try again
          throw error;
        });
        const embeddings: number[][] = [];
        let promptTokens = 0;
        for (const [i, text] of request.input.entries()) {
          if (call.signal?.aborted) throw failure(call.signal.reason, call);
          const length = context.calculateInputLength(text);
          if (length > entry.contextSize) {
            throw new EngineError(
              `input ${i} has ${length} tokens; ${request.model} takes at most ${entry.contextSize}`,
              false,
            );
          }
          promptTokens += length;
          embeddings.push([...(await context.getEmbeddingFor(text)).vector]);
        }
        return { embeddings, prompt_tokens: promptTokens };
      } catch (error) {
        throw failure(error, call);
      }
    });
  }

  return {
    name: 'llama-cpp',
    models: () => [...loaded.keys()],
    chatFields: () => LLAMA_CPP_CHAT_FIELDS,
    chat,
    embed,
    transcribe: () => Promise.reject(new EngineError('transcription is not supported by llama-cpp', false)),
    generateImage: () => Promise.reject(new EngineError('image generation is not supported by llama-cpp', false)),
    async close() {
      await llama.dispose();
    },
  };
}
