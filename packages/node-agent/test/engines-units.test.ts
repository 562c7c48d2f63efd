import { inflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { encodeGguf } from '../src/engines/gguf-writer.js';
import { sniffImageType } from '../src/engines/openai-upstream.js';
import { createSseParser, type SseEvent } from '../src/engines/sse.js';
import { estimateChatPromptTokens, estimateTokens } from '../src/engines/token-estimate.js';
import { wavDurationSeconds } from '../src/engines/wav.js';
import { crc32, createPng, createSineWav, hashedEmbedding, PNG_SIGNATURE } from './openai-test-server-content.js';

describe('token estimate', () => {
  it('is ceil(UTF-8 bytes / 4), at least 1 for non-empty text, 0 for empty', () => {
    expect(estimateTokens('')).toBe(0);
    expect(estimateTokens('a')).toBe(1);
    expect(estimateTokens('abcd')).toBe(1);
    expect(estimateTokens('abcde')).toBe(2);
    expect(estimateTokens('hello world')).toBe(3);
    expect(estimateTokens('日本語')).toBe(3); // 9 bytes
    expect(
      estimateChatPromptTokens([
        { role: 'system', content: 'abcd' },
        { role: 'user', content: 'abcde' },
        { role: 'assistant', content: '' },
      ]),
    ).toBe(3);
  });
});

describe('SSE parser', () => {
  const STREAM = ': comment\r\nevent: note\r\ndata: line one\r\ndata:line two\r\n\r\ndata: {"x":1}\n\ndata: [DONE]\r\r';
  const EXPECTED: SseEvent[] = [
    { event: 'note', data: 'line one\nline two' },
    { event: 'message', data: '{"x":1}' },
    { event: 'message', data: '[DONE]' },
  ];

  it('handles CRLF, LF and CR endings, comments, event names and multi-line data', () => {
    const events: SseEvent[] = [];
    const parser = createSseParser((e) => events.push(e));
    parser.push(STREAM);
    parser.end();
    expect(events).toEqual(EXPECTED);
  });

  it('gives the same events however the stream is split, CRLF pairs included', () => {
    for (let cut = 1; cut < STREAM.length; cut++) {
      for (const second of [cut + 1, cut + 7]) {
        const events: SseEvent[] = [];
        const parser = createSseParser((e) => events.push(e));
        parser.push(STREAM.slice(0, cut));
        parser.push('');
        parser.push(STREAM.slice(cut, second));
        parser.push(STREAM.slice(second));
        parser.end();
        expect(events, `cut at ${cut}/${second}`).toEqual(EXPECTED);
      }
    }
  });

  it('dispatches a last event that lacks its blank line at the end of the stream', () => {
    const events: SseEvent[] = [];
    const parser = createSseParser((e) => events.push(e));
    parser.push('data: [DONE]');
    expect(events).toEqual([]);
    parser.end();
    expect(events).toEqual([{ event: 'message', data: '[DONE]' }]);
  });
});

describe('WAV duration', () => {
  it('reads 2.5 s from a 16 kHz 16-bit mono file, and undefined from non-WAV bytes', () => {
    expect(wavDurationSeconds(createSineWav({ seconds: 2.5 }))).toBe(2.5);
    expect(wavDurationSeconds(createSineWav({ seconds: 1, sampleRate: 8_000 }))).toBe(1);
    expect(wavDurationSeconds(Buffer.from('ID3 mp3 bytes'))).toBeUndefined();
  });

  it('skips unknown chunks and counts the bytes present when the data size is unknown', () => {
    const wav = createSineWav({ seconds: 0.5 });
    const list = Buffer.concat([Buffer.from('LIST'), Buffer.from([3, 0, 0, 0]), Buffer.from('abc\0')]); // odd size, padded
    const withList = Buffer.concat([wav.subarray(0, 36), list, wav.subarray(36)]);
    expect(wavDurationSeconds(withList)).toBe(0.5);
    const streaming = Buffer.from(wav);
    streaming.writeUInt32LE(0xffffffff, 40);
    expect(wavDurationSeconds(streaming)).toBe(0.5);
  });
});

describe('test-server content', () => {
  it('draws a real PNG: signature, IHDR, IDAT that inflates to the scanlines, IEND, correct CRCs', () => {
    const png = createPng(5, 3, 'x');
    expect(png.subarray(0, 8).equals(PNG_SIGNATURE)).toBe(true);
    expect(sniffImageType(png)).toBe('image/png');
    const chunks: { type: string; data: Buffer }[] = [];
    for (let at = 8; at < png.length;) {
      const length = png.readUInt32BE(at);
      const type = png.toString('latin1', at + 4, at + 8);
      const data = png.subarray(at + 8, at + 8 + length);
      expect(png.readUInt32BE(at + 8 + length), `${type} CRC`).toBe(crc32(png.subarray(at + 4, at + 8 + length)));
      chunks.push({ type, data });
      at += 12 + length;
    }
    expect(chunks.map((c) => c.type)).toEqual(['IHDR', 'IDAT', 'IEND']);
    expect(chunks[0]?.data.readUInt32BE(0)).toBe(5);
    expect(chunks[0]?.data.readUInt32BE(4)).toBe(3);
    expect(inflateSync(chunks[1]?.data ?? Buffer.alloc(0)).length).toBe(3 * (1 + 5 * 3));
  });

  it('CRC-32 matches the standard check value', () => {
    expect(crc32(Buffer.from('123456789'))).toBe(0xcbf43926);
  });

  it('hashed embeddings are unit vectors and deterministic', () => {
    const v = hashedEmbedding('Hello, hello world', 384);
    expect(v).toEqual(hashedEmbedding('hello HELLO world', 384));
    expect(Math.sqrt(v.reduce((s, x) => s + x * x, 0))).toBeCloseTo(1, 12);
    expect(hashedEmbedding('', 8)).toEqual([1, 0, 0, 0, 0, 0, 0, 0]);
  });
});

describe('GGUF writer', () => {
  it('writes the v3 header, typed metadata, tensor infos and 32-byte-aligned data', () => {
    const bytes = encodeGguf({
      metadata: [
        ['general.architecture', { type: 'string', value: 'llama' }],
        ['n', { type: 'u32', value: 7 }],
      ],
      tensors: [
        { name: 'a', dims: [3], data: new Float32Array([1, 2, 3]) },
        { name: 'b', dims: [2, 1], data: new Float32Array([4, 5]) },
      ],
    });
    expect(bytes.toString('latin1', 0, 4)).toBe('GGUF');
    expect(bytes.readUInt32LE(4)).toBe(3);
    expect(bytes.readBigUInt64LE(8)).toBe(2n); // tensors
    expect(bytes.readBigUInt64LE(16)).toBe(2n); // metadata entries
    let at = 24;
    const str = (): string => {
      const n = Number(bytes.readBigUInt64LE(at));
      const s = bytes.toString('utf8', at + 8, at + 8 + n);
      at += 8 + n;
      return s;
    };
    expect(str()).toBe('general.architecture');
    expect(bytes.readUInt32LE(at)).toBe(8); // string
    at += 4;
    expect(str()).toBe('llama');
    expect(str()).toBe('n');
    expect([bytes.readUInt32LE(at), bytes.readUInt32LE(at + 4)]).toEqual([4, 7]); // u32 7
    at += 8;
    const offsets: bigint[] = [];
    for (const [name, dims] of [
      ['a', [3n]],
      ['b', [2n, 1n]],
    ] as const) {
      expect(str()).toBe(name);
      expect(bytes.readUInt32LE(at)).toBe(dims.length);
      at += 4;
      for (const d of dims) {
        expect(bytes.readBigUInt64LE(at)).toBe(d);
        at += 8;
      }
      expect(bytes.readUInt32LE(at)).toBe(0); // F32
      offsets.push(bytes.readBigUInt64LE(at + 4));
      at += 12;
    }
    expect(offsets).toEqual([0n, 32n]);
    const dataStart = Math.ceil(at / 32) * 32;
    expect(bytes.readFloatLE(dataStart + 8)).toBe(3);
    expect(bytes.readFloatLE(dataStart + 32 + 4)).toBe(5);
    expect(bytes.length % 32).toBe(0);
  });

  it('refuses a tensor whose data does not fill its dims', () => {
    expect(() =>
      encodeGguf({ metadata: [], tensors: [{ name: 'x', dims: [2, 2], data: new Float32Array(3) }] }),
    ).toThrow('tensor x: dims 2x2 need 4 values, got 3');
  });
});
