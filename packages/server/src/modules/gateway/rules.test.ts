import { describe, expect, it } from 'vitest';
import { ApiError } from '../../platform/errors.js';
import { sniffAudio } from './audio.js';
import { base64Floats } from './embeddings.js';
import { checkFileUrl, presignFileUrl } from './files.js';
import { busMessages } from './hub.js';
import { parseEvents } from '../work/node-events.js';
import { audioSecondsBound, estimateTokens, holdCents, promptTokenBound, usageFromUnits } from './pricing.js';
import { chooseNode, type RouteCandidate } from './routing.js';

const node = (id: string, fields: Partial<RouteCandidate> = {}): RouteCandidate => ({
  id,
  org_id: 'org_1',
  country: 'CA',
  region: null,
  gpu_model: null,
  chat_fields: [],
  attestation_verified: false,
  open_work: 0,
  ...fields,
});

describe('routing (pure)', () => {
  const nodes = [
    node('ca1', { open_work: 2 }),
    node('ca2', { open_work: 1 }),
    node('us1', { country: 'US', open_work: 0, attestation_verified: true }),
  ];

  it('picks the least loaded eligible node', () => {
    expect(chooseNode(nodes, { model: 'tinyllama' })).toMatchObject({ node: { id: 'us1' } });
    expect(chooseNode(nodes, { model: 'tinyllama', strict_jurisdiction: 'CA' })).toMatchObject({ node: { id: 'ca2' } });
  });

  it('prefers the jurisdiction asked, but falls back to any eligible node', () => {
    expect(chooseNode(nodes, { model: 'tinyllama', jurisdiction: 'CA' })).toEqual({
      node: nodes[1],
      preferred: true,
      candidates: 3,
      eligible: 3,
      reason:
        'least loaded (1 open) of 2 node(s), in CA as preferred; 3 of 3 live node(s) serving tinyllama were eligible',
    });
    expect(chooseNode(nodes, { model: 'tinyllama', jurisdiction: 'DE' })).toMatchObject({
      node: nodes[2],
      preferred: false,
      reason: expect.stringContaining('none in the preferred DE, so any eligible node'),
    });
    expect(chooseNode(nodes, { model: 'tinyllama', strict_jurisdiction: 'CA', exclude: ['ca2'] })).toMatchObject({
      reason: expect.stringContaining('(in CA (strict_jurisdiction), not already tried (1))'),
    });
  });

  it('never breaks a hard constraint, and says which one left no node', () => {
    expect(chooseNode(nodes, { model: 'tinyllama', strict_jurisdiction: 'DE' })).toEqual({
      refusal: 'no live node serves tinyllama in DE',
    });
    expect(chooseNode(nodes, { model: 'tinyllama', strict_jurisdiction: 'CA', requires_tee: true })).toEqual({
      refusal: 'no live node serves tinyllama in CA with a verified TEE (requires_tee)',
    });
    expect(chooseNode(nodes, { model: 'phi-4', requires_tee: true })).toMatchObject({ node: { id: 'us1' } });
    expect(chooseNode([], { model: 'phi-4' })).toEqual({ refusal: 'no live node serves phi-4' });
    expect(chooseNode(nodes, { model: 'tinyllama', strict_jurisdiction: 'US', exclude: ['us1'] })).toEqual({
      refusal: 'no other live node serves tinyllama in US',
    });
  });

  it('spreads ties at random', () => {
    const tied = [node('a'), node('b'), node('c')];
    const picks = [0, 0.4, 0.9, 0.999].map((r) => chooseNode(tied, { model: 'm' }, () => r));
    expect(picks.map((p) => ('node' in p ? p.node.id : p.refusal))).toEqual(['a', 'b', 'c', 'c']);
  });

  it('takes only nodes whose engine honours every chat field used, before the jurisdiction preference; else names the field', () => {
    const mixed = [
      node('old', { country: 'US', open_work: 0 }),
      node('tools', { open_work: 3, chat_fields: ['tools', 'seed'] }),
      node('json', { open_work: 1, chat_fields: ['response_format', 'seed'] }),
    ];
    const tools = chooseNode(mixed, { model: 'tinyllama', jurisdiction: 'US', fields: ['tools'] });
    expect('node' in tools && tools.node.id).toBe('tools');
    expect('node' in tools && tools.reason).toContain('honouring tools');
    const seed = chooseNode(mixed, { model: 'tinyllama', fields: ['seed'] });
    expect('node' in seed && seed.node.id).toBe('json');
    expect(chooseNode(mixed, { model: 'tinyllama', fields: ['logit_bias'] })).toEqual({
      refusal:
        'logit_bias is not supported by the engine of any live node serving tinyllama; send the request without it',
      field: 'logit_bias',
    });
    // Each field is honoured somewhere, never both on one node: the one the most capable lacks.
    expect(chooseNode(mixed, { model: 'tinyllama', fields: ['seed', 'tools', 'response_format'] })).toMatchObject({
      field: 'response_format',
    });
    // No live node at all stays a capacity refusal (503), not a field's.
    expect(chooseNode([], { model: 'tinyllama', fields: ['tools'] })).toEqual({
      refusal: 'no live node serves tinyllama',
    });
  });
});

describe('pricing (pure)', () => {
  it("estimates tokens with the agent's rule and bounds prompts by their bytes", () => {
    expect(estimateTokens('')).toBe(0);
    expect(estimateTokens('hello world')).toBe(3);
    expect(estimateTokens('é')).toBe(1);
    expect(promptTokenBound(['hello', 'é'])).toBe(5 + 16 + 2 + 16);
  });

  it('holds the maximum cost rounded up plus a cent for the carry', () => {
    expect(holdCents(0)).toBe(1);
    expect(holdCents(10_000)).toBe(2);
    expect(holdCents(10_001)).toBe(3);
  });

  it('bounds audio length by the WAV header, else by the size at 16 kbit/s', () => {
    const wav = Buffer.alloc(44 + 32_000 * 2.5);
    wav.write('RIFF', 0, 'latin1');
    wav.write('WAVE', 8, 'latin1');
    wav.write('fmt ', 12, 'latin1');
    wav.writeUInt32LE(16, 16);
    wav.writeUInt32LE(32_000, 28);
    wav.write('data', 36, 'latin1');
    wav.writeUInt32LE(80_000, 40);
    expect(audioSecondsBound(wav)).toBe(3);
    expect(audioSecondsBound(Buffer.alloc(10_001))).toBe(6);
  });

  it('reads signed units as usage: chat split by the reported prompt count, never beyond the signed total', () => {
    expect(usageFromUnits('chat', 30, { prompt_tokens: 10, completion_tokens: 20 })).toEqual({
      prompt_tokens: 10,
      completion_tokens: 20,
    });
    expect(usageFromUnits('chat', 30, { prompt_tokens: 50 })).toEqual({ prompt_tokens: 30, completion_tokens: 0 });
    expect(usageFromUnits('chat', 30, null)).toEqual({ prompt_tokens: 0, completion_tokens: 30 });
    expect(usageFromUnits('embeddings', 7, null)).toEqual({ prompt_tokens: 7 });
    expect(usageFromUnits('transcription', 3, null)).toEqual({ audio_seconds: 3 });
    expect(usageFromUnits('image', 2, null)).toEqual({ images: 2 });
  });
});

describe('wire helpers (pure)', () => {
  it('recognises audio by its bytes', () => {
    expect(sniffAudio(Buffer.from('RIFF\0\0\0\0WAVEfmt ', 'latin1'))).toBe('wav');
    expect(sniffAudio(Buffer.from('ID3\x03\0\0', 'latin1'))).toBe('mp3');
    expect(sniffAudio(Buffer.from([0xff, 0xfb, 0x90, 0x00]))).toBe('mp3');
    expect(sniffAudio(Buffer.from([0xff, 0xf1, 0x50, 0x80]))).toBeUndefined(); // ADTS AAC, layer 0
    expect(sniffAudio(Buffer.from('fLaC\0\0\0\x22', 'latin1'))).toBe('flac');
    expect(sniffAudio(Buffer.from('\0\0\0\x18ftypmp42', 'latin1'))).toBe('m4a');
    expect(sniffAudio(Buffer.from([0x1a, 0x45, 0xdf, 0xa3]))).toBe('webm');
    expect(sniffAudio(Buffer.from('%PDF-1.7', 'latin1'))).toBeUndefined();
    expect(sniffAudio(Buffer.alloc(0))).toBeUndefined();
  });

  it('parses NDJSON stream events and names the bad line', () => {
    expect(
      parseEvents(
        '{"type":"delta","content":"Hel"}\n\n{"type":"delta","content":"lo"}\n{"type":"done","usage":{"prompt_tokens":1,"completion_tokens":2},"finish_reason":"stop"}\n',
      ),
    ).toEqual([
      { type: 'delta', content: 'Hel' },
      { type: 'delta', content: 'lo' },
      { type: 'done', usage: { prompt_tokens: 1, completion_tokens: 2 }, finish_reason: 'stop' },
    ]);
    expect(parseEvents('{"type":"error","message":"boom","retryable":false}')).toEqual([
      { type: 'error', message: 'boom', retryable: false },
    ]);
    expect(() => parseEvents('{"type":"delta","content":"a"}\nnot json')).toThrow(ApiError);
    expect(() => parseEvents('{"type":"delta","content":"a"}\nnot json')).toThrow('line 2: is not JSON');
    expect(() => parseEvents('{"type":"delta"}')).toThrow('line 1: must be');
    expect(() => parseEvents('{"type":"done","usage":{"prompt_tokens":-1}}')).toThrow('usage counts');
  });

  it('cuts bus messages under the NOTIFY payload limit without losing or reordering text', () => {
    const events = [
      { type: 'delta' as const, content: 'x'.repeat(20_000) },
      ...Array.from({ length: 500 }, (_, i) => ({ type: 'delta' as const, content: `t${i} ` })),
      { type: 'done' as const, finish_reason: 'stop' },
    ];
    const messages = busMessages('wrk_1', events);
    expect(messages.length).toBeGreaterThan(3);
    expect(messages.every((m) => Buffer.byteLength(m) < 8000)).toBe(true);
    const back = messages.flatMap((m) => (JSON.parse(m) as { e: { type: string; content?: string }[] }).e);
    expect(back.map((e) => e.content ?? '').join('')).toBe(
      events.map((e) => ('content' in e ? e.content : '')).join(''),
    );
    expect(back.at(-1)).toEqual({ type: 'done', finish_reason: 'stop' });
  });

  it('presigns file URLs that expire and refuse any alteration', () => {
    const ctx = {
      secrets: { sessionSecret: Buffer.from('s'.repeat(64)) },
      config: { publicUrl: 'https://svc.example', fileUrlTtlSeconds: 3600 },
    } as Parameters<typeof presignFileUrl>[0];
    const url = new URL(presignFileUrl(ctx, 'img-a-0.png'));
    expect(url.pathname).toBe('/v1/files/img-a-0.png');
    const query = {
      expires: url.searchParams.get('expires') ?? '',
      signature: url.searchParams.get('signature') ?? '',
    };
    expect(Number(query.expires) - Date.now() / 1000).toBeGreaterThan(3590);
    expect(checkFileUrl(ctx, 'img-a-0.png', query)).toBe('ok');
    expect(checkFileUrl(ctx, 'img-a-1.png', query)).toBe('invalid');
    expect(checkFileUrl(ctx, 'img-a-0.png', { ...query, expires: String(Number(query.expires) + 1) })).toBe('invalid');
    expect(checkFileUrl(ctx, 'img-a-0.png', { expires: query.expires })).toBe('invalid');
    expect(checkFileUrl(ctx, 'img-a-0.png', query, Date.now() + 3_601_000)).toBe('expired');
    const other = { ...ctx, secrets: { sessionSecret: Buffer.from('t'.repeat(64)) } } as typeof ctx;
    expect(checkFileUrl(other, 'img-a-0.png', query)).toBe('invalid');
  });

  it('encodes base64 embeddings as little-endian float32', () => {
    const b = Buffer.from(base64Floats([1, -0.5]), 'base64');
    expect([b.readFloatLE(0), b.readFloatLE(4)]).toEqual([1, -0.5]);
  });
});
