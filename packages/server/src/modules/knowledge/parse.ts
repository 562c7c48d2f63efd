import { Worker } from 'node:worker_threads';
import { ApiError } from '../../platform/errors.js';
import { chunkText, type TextChunk } from './chunking.js';
import { extractText, type DocumentFormat } from './extract.js';

/**
 * Extraction and chunking of one document, bounded: a nesting depth checked before parsing, caps
 * on the extracted text and the chunk count, and (in a worker thread) a heap limit and a deadline.
 * A document beyond any of them fails with a reason the document shows; the server process is
 * never the one that runs out of memory. docs/security.md ("Ingestion limits") lists the values.
 */

export interface ParseLimits {
  /** Deepest Markdown list or quote nesting accepted. */
  maxNesting: number;
  /** Most characters of extracted text. */
  maxTextChars: number;
  /** Most chunks one document may produce. */
  maxChunks: number;
  /** Heap of the worker thread (resourceLimits.maxOldGenerationSizeMb). */
  heapMb: number;
  /** Wall-clock time a parse may take, worker start included. */
  timeoutMs: number;
  /** `worker` (default) or `inline`: in the server process, without heap limit or deadline (debugging only). */
  isolation: 'worker' | 'inline';
}

export interface ParseInput {
  bytes: Uint8Array;
  format: DocumentFormat;
  chunkSize: number;
  chunkOverlap: number;
}

export interface ParsedDocument {
  textChars: number;
  pages?: number;
  chunks: TextChunk[];
}

/** A document refused by a limit: the message is what the document's `error` says. */
const refused = (message: string) => new ApiError('invalid_request', message);

/**
 * The deepest nesting of Markdown lists and block quotes, estimated from indentation (a nested list
 * item is indented at least two columns more than its parent) and `>` markers, without parsing.
 */
export function markdownNesting(text: string): number {
  let deepest = 0;
  let lineStart = 0;
  while (lineStart <= text.length) {
    let i = lineStart;
    let columns = 0;
    let quotes = 0;
    for (; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c === 0x20) columns++;
      else if (c === 0x09) columns += 4 - (columns % 4);
      else if (c === 0x3e) quotes++;
      else break;
    }
    deepest = Math.max(deepest, Math.floor(columns / 2), quotes);
    const next = text.indexOf('\n', i);
    if (next < 0) break;
    lineStart = next + 1;
  }
  return deepest;
}

/** The bounded parse itself (what the worker runs). Throws invalid_request naming the limit. */
export async function parseBounded(
  input: ParseInput,
  limits: Pick<ParseLimits, 'maxNesting' | 'maxTextChars' | 'maxChunks'>,
): Promise<ParsedDocument> {
  const bytes = Buffer.from(input.bytes.buffer, input.bytes.byteOffset, input.bytes.byteLength);
  if (input.format === 'text/markdown') {
    const depth = markdownNesting(bytes.toString('utf8'));
    if (depth > limits.maxNesting)
      throw refused(
        `the document nests about ${depth} levels deep (lists, quotes or indentation); the limit is ${limits.maxNesting}`,
      );
  }
  let extracted: { text: string; pages?: number };
  try {
    extracted = await extractText(bytes, input.format);
  } catch (err) {
    if (err instanceof RangeError && /call stack/i.test(err.message))
      throw refused('the document is nested too deeply to parse');
    throw err;
  }
  const { text, pages } = extracted;
  if (text.length > limits.maxTextChars)
    throw refused(`the document's text is ${text.length} characters; the limit is ${limits.maxTextChars}`);
  const chunks = await chunkText(text, { size: input.chunkSize, overlap: input.chunkOverlap });
  if (chunks.length > limits.maxChunks)
    throw refused(`the document makes ${chunks.length} chunks; the limit is ${limits.maxChunks}`);
  return { textChars: text.length, ...(pages === undefined ? {} : { pages }), chunks };
}

type WorkerAnswer = { ok: true; parsed: ParsedDocument } | { ok: false; message: string; refused: boolean };

const BOOT = new URL('./parse-boot.mjs', import.meta.url);
const ENTRY = new URL(`./parse-worker.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url);

/** How long a parse worker that finished its document waits for the next one before it exits. */
const IDLE_MS = 15_000;

let started = 0;
let idle: { worker: Worker; heapMb: number; timer: NodeJS.Timeout } | undefined;

/** Parse worker threads started by this process (each costs about 0.45 s of CPU to boot). */
export function parseWorkersStarted(): number {
  return started;
}

/**
 * The idle worker when it was started with the same heap limit, else a new one. Booting a worker
 * (its module graph through tsx, the tokenizer's tables) costs more CPU than parsing most
 * documents, so a worker that answered is kept for the next document.
 */
function takeWorker(heapMb: number): Worker {
  const kept = idle;
  if (kept && kept.heapMb === heapMb) {
    idle = undefined;
    clearTimeout(kept.timer);
    kept.worker.ref();
    return kept.worker;
  }
  started++;
  return new Worker(BOOT, {
    workerData: { entry: ENTRY.href },
    resourceLimits: {
      maxOldGenerationSizeMb: heapMb,
      maxYoungGenerationSizeMb: Math.max(8, Math.floor(heapMb / 8)),
      stackSizeMb: 4,
    },
    stdout: false,
    stderr: false,
  });
}

/** Keeps a worker that answered, idle and unreferenced, for {@link IDLE_MS}; one at most. */
function keepWorker(worker: Worker, heapMb: number): void {
  const previous = idle;
  if (previous) {
    idle = undefined;
    clearTimeout(previous.timer);
    void previous.worker.terminate();
  }
  worker.unref();
  const timer = setTimeout(() => {
    if (idle?.worker === worker) idle = undefined;
    void worker.terminate();
  }, IDLE_MS);
  timer.unref();
  idle = { worker, heapMb, timer };
  worker.once('exit', () => {
    if (idle?.worker !== worker) return;
    clearTimeout(idle.timer);
    idle = undefined;
  });
}

/**
 * Extracts and chunks a document within `limits`: in a worker thread with its own heap limit and
 * a deadline (terminated when it passes, or when it fails), unless `isolation` is `inline`. A
 * worker that answered is reused by the next document with the same heap limit.
 *
 * @example
 * const { chunks } = await parseDocument({ bytes, format: 'text/markdown', chunkSize: 512, chunkOverlap: 64 }, limits);
 */
export function parseDocument(input: ParseInput, limits: ParseLimits): Promise<ParsedDocument> {
  if (limits.isolation === 'inline') return parseBounded(input, limits);
  return new Promise<ParsedDocument>((resolve, reject) => {
    const worker = takeWorker(limits.heapMb);
    let settled = false;
    const settle = (reuse: boolean, fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      worker.off('message', onMessage);
      worker.off('error', onError);
      worker.off('exit', onExit);
      fn();
      if (reuse) keepWorker(worker, limits.heapMb);
      else void worker.terminate();
    };
    const deadline = setTimeout(
      () => settle(false, () => reject(refused(`parsing the document took longer than ${limits.timeoutMs} ms`))),
      limits.timeoutMs,
    );
    const onMessage = (answer: WorkerAnswer) =>
      settle(answer.ok || answer.refused, () =>
        answer.ok
          ? resolve(answer.parsed)
          : reject(answer.refused ? refused(answer.message) : new Error(answer.message)),
      );
    const onError = (err: Error & { code?: string }) =>
      settle(false, () =>
        reject(
          err.code === 'ERR_WORKER_OUT_OF_MEMORY'
            ? refused(`parsing the document needed more than ${limits.heapMb} MB of memory`)
            : err,
        ),
      );
    const onExit = (code: number) =>
      settle(false, () => reject(new Error(`the document parser stopped (exit code ${code})`)));
    worker.on('message', onMessage);
    worker.on('error', onError);
    worker.on('exit', onExit);
    const { format, chunkSize, chunkOverlap } = input;
    worker.postMessage({
      input: { bytes: input.bytes, format, chunkSize, chunkOverlap },
      limits: { maxNesting: limits.maxNesting, maxTextChars: limits.maxTextChars, maxChunks: limits.maxChunks },
    });
  });
}
