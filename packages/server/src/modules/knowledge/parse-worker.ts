import { parentPort } from 'node:worker_threads';
import { ApiError } from '../../platform/errors.js';
import { parseBounded, type ParseInput, type ParseLimits } from './parse.js';

// The worker thread of parseDocument: one answer per document; the host keeps a worker that
// answered for the next document, and terminates one that failed or ran past its deadline.
parentPort?.on(
  'message',
  (request: { input: ParseInput; limits: Pick<ParseLimits, 'maxNesting' | 'maxTextChars' | 'maxChunks'> }) => {
    parseBounded(request.input, request.limits).then(
      (parsed) => parentPort?.postMessage({ ok: true, parsed }),
      (err: unknown) => {
        const limit = err instanceof ApiError && err.code !== 'internal';
        const overflow = err instanceof RangeError && /call stack/i.test(err.message);
        parentPort?.postMessage({
          ok: false,
          refused: limit || overflow,
          message: overflow
            ? 'the document is nested too deeply to parse'
            : err instanceof Error
              ? err.message
              : String(err),
        });
      },
    );
  },
);
