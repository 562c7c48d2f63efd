import { describe, expect, it } from 'vitest';
import {
  AUDIO_MARGIN_SECONDS,
  RUNTIME_MARGIN_SECONDS,
  TOKEN_MARGIN_PER_CALL,
  defaultCompletionTokens,
  meteringBound,
  promptTokenBound,
  type MeteringSubject,
} from './metering-bound.js';

const job = (kind: number, fields: Partial<Extract<MeteringSubject, { type: 'job' }>> = {}): MeteringSubject => ({
  type: 'job',
  kind,
  model: null,
  inputs: [],
  timeoutSeconds: 300,
  cores: 8,
  ...fields,
});

describe('meteringBound: the most units a receipt may sign for its work (issue 40 point 6)', () => {
  const table: [string, MeteringSubject, number | undefined][] = [
    // 'hi' is 2 bytes, +16 per message, +16 max_tokens, +256 per engine call.
    ['chat, max_tokens 16', { type: 'chat', prompts: ['hi'], maxTokens: 16 }, 2 + 16 + 16 + 256],
    ['chat, two messages', { type: 'chat', prompts: ['sys', 'héllo'], maxTokens: 100 }, 3 + 16 + 6 + 16 + 100 + 256],
    ['chat, the model default', { type: 'chat', prompts: [''], maxTokens: 2048 }, 16 + 2048 + 256],
    ['embeddings', { type: 'embeddings', inputs: ['a', 'bb'] }, 1 + 16 + 2 + 16 + 256],
    ['images', { type: 'image', n: 3 }, 3],
    ['transcription, 2.5 s', { type: 'transcription', audioSeconds: 2.5 }, 3 + 2],
    [
      'job 1, two inputs of tinyllama',
      job(1, { model: 'tinyllama', inputs: ['x', 'yy'] }),
      1 + 16 + 2 + 16 + 2 * (2048 + 256),
    ],
    ['job 2', job(2, { inputs: ['abcd'] }), 4 + 16 + 256],
    ['job 3: 25 MiB at 16 kbit/s', job(3), 13_108 + 2],
    ['job 4: one image per prompt', job(4, { inputs: ['a', 'b', 'c'] }), 3],
    ['job 5: core-seconds on 8 cores', job(5, { timeoutSeconds: 300 }), (300 + 60) * 8],
    ['job 5 on a node declaring no cores', job(5, { timeoutSeconds: 10, cores: 0 }), 70],
    ['job 6: GPU-seconds', job(6, { timeoutSeconds: 100 }), 160],
    ['job 7', job(7, { timeoutSeconds: 3600 }), 3660],
    ['job 8: the server counts scenes', job(8), undefined],
    ['job 9: one run', job(9), 1],
    ['job 10: the server counts gigabytes', job(10), undefined],
  ];
  it.each(table)('%s', (_name, subject, bound) => {
    expect(meteringBound(subject)).toBe(bound);
  });

  it('keeps its margins where docs/receipts.md says, and the prompt bound the holds use', () => {
    expect([TOKEN_MARGIN_PER_CALL, AUDIO_MARGIN_SECONDS, RUNTIME_MARGIN_SECONDS]).toEqual([256, 2, 60]);
    expect(promptTokenBound(['hello'])).toBe(21);
    expect([defaultCompletionTokens('phi-4'), defaultCompletionTokens('svc-llama-3.2-3b')]).toEqual([16_384, 32_768]);
    expect(defaultCompletionTokens(null)).toBe(32_768);
  });

  it('the probe: 2e9 units for a chat with max_tokens 16 is far above its bound', () => {
    const bound = meteringBound({ type: 'chat', prompts: ['say hi'], maxTokens: 16 }) ?? 0;
    expect(bound).toBe(6 + 16 + 16 + 256);
    expect(2e9 > bound).toBe(true);
  });
});
