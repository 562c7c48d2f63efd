import { describe, expect, it } from 'vitest';
import { readChatStream, splitEvents, type ChatChunk } from './sse';

function streamOf(pieces: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const p of pieces) controller.enqueue(encoder.encode(p));
      controller.close();
    },
  });
}

describe('reading the gateway stream', () => {
  it('splits complete events and keeps the unfinished rest', () => {
    expect(splitEvents('data: {"a":1}\n\ndata: [DO')).toEqual({ events: ['{"a":1}'], rest: 'data: [DO' });
    expect(splitEvents('data: x\r\n\r\n: comment\n\ndata: y\n\n')).toEqual({ events: ['x', 'y'], rest: '' });
  });

  it('yields chunks cut anywhere, in order, and stops at [DONE]', async () => {
    const text =
      'data: {"id":"chatcmpl-1","choices":[{"delta":{"role":"assistant","content":""}}],"svc_node":{"node_id":"node_1","gpu_model":"","region":"ca","country":"CA"}}\n\n' +
      'data: {"id":"chatcmpl-1","choices":[{"delta":{"content":"Hé"}}]}\n\n' +
      'data: {"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2},"svc_receipt_id":"rcpt_1"}\n\n' +
      'data: [DONE]\n\ndata: {"ignored":true}\n\n';
    const bytes = new TextEncoder().encode(text);
    const cutInsideE = text.indexOf('é') + 1; // the two-byte é is split across reads
    const chunks: ChatChunk[] = [];
    const raw = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(bytes.slice(0, 150));
        controller.enqueue(bytes.slice(150, cutInsideE));
        controller.enqueue(bytes.slice(cutInsideE));
        controller.close();
      },
    });
    for await (const c of readChatStream(raw)) chunks.push(c);
    expect(chunks.map((c) => c.choices?.[0]?.delta?.content ?? null)).toEqual(['', 'Hé', null]);
    expect(chunks[0]?.svc_node?.country).toBe('CA');
    expect(chunks[2]?.svc_receipt_id).toBe('rcpt_1');
  });

  it('surfaces an error event mid-stream as a chunk', async () => {
    const chunks: ChatChunk[] = [];
    for await (const c of readChatStream(
      streamOf(['data: {"error":{"message":"node failed","code":502}}\n\n', 'data: [DONE]\n\n']),
    ))
      chunks.push(c);
    expect(chunks).toEqual([{ error: { message: 'node failed', code: 502 } }]);
  });
});
