import { describe, expect, it } from 'vitest';
import { MODELS, findModel, modelsOfType, usageCostMicro } from './catalogue.js';
import { ProtocolError } from './errors.js';

describe('MODELS', () => {
  it('lists the DESIGN section 10 catalogue', () => {
    expect(MODELS.map((m) => [m.id, m.type])).toEqual([
      ['phi-4', 'chat'],
      ['svc-llama-3.2-3b', 'chat'],
      ['tinyllama', 'chat'],
      ['all-MiniLM-L6-v2', 'embeddings'],
      ['nomic-embed-text', 'embeddings'],
      ['whisper-base', 'transcription'],
      ['sdxl-turbo', 'image'],
    ]);
    expect(new Set(MODELS.map((m) => m.owned_by))).toEqual(new Set(['svc']));
  });

  it('has the embedding dimensions of the spec', () => {
    expect(findModel('all-MiniLM-L6-v2')?.dimensions).toBe(384);
    expect(findModel('nomic-embed-text')?.dimensions).toBe(768);
  });

  it('prices audio at 0.006 CAD per minute and images at 0.03 CAD each', () => {
    expect(findModel('whisper-base')?.price).toEqual({ unit: 'audio_second', micro_cad_per_unit: 100 });
    expect(findModel('sdxl-turbo')?.price).toEqual({ unit: 'image', micro_cad_per_unit: 30_000 });
  });

  it('prices chat prompt and completion tokens per 1,000, as positive integers', () => {
    for (const model of modelsOfType('chat')) {
      expect(model.price.unit).toBe('1k_tokens');
      expect(Number.isSafeInteger(model.price.micro_cad_per_unit)).toBe(true);
      expect(model.price.completion_micro_cad_per_unit).toBeGreaterThanOrEqual(model.price.micro_cad_per_unit);
      expect(model.context_length).toBeGreaterThan(0);
    }
  });

  it('is frozen', () => {
    expect(Object.isFrozen(MODELS)).toBe(true);
    expect(MODELS.every((m) => Object.isFrozen(m) && Object.isFrozen(m.price))).toBe(true);
  });
});

describe('findModel / modelsOfType', () => {
  it('finds by id and filters by type', () => {
    expect(findModel('phi-4')?.type).toBe('chat');
    expect(findModel('gpt-4o')).toBeUndefined();
    expect(modelsOfType('embeddings').map((m) => m.id)).toEqual(['all-MiniLM-L6-v2', 'nomic-embed-text']);
    expect(modelsOfType('image').map((m) => m.id)).toEqual(['sdxl-turbo']);
  });
});

describe('usageCostMicro', () => {
  it('prices each kind of usage', () => {
    expect(usageCostMicro('phi-4', { prompt_tokens: 1_000, completion_tokens: 500 })).toBe(1_200);
    expect(usageCostMicro('phi-4', { prompt_tokens: 1 })).toBe(1); // 0.6 micro-CAD, rounded up
    expect(usageCostMicro('all-MiniLM-L6-v2', { prompt_tokens: 50_000 })).toBe(1_000);
    expect(usageCostMicro('whisper-base', { audio_seconds: 60 })).toBe(6_000); // 0.006 CAD
    expect(usageCostMicro('sdxl-turbo', { images: 2 })).toBe(60_000);
    expect(usageCostMicro('tinyllama', {})).toBe(0);
  });

  it('rejects an unknown model and bad counts', () => {
    expect(() => usageCostMicro('gpt-4o', {})).toThrow(ProtocolError);
    expect(() => usageCostMicro('sdxl-turbo', { images: -1 })).toThrow(ProtocolError);
    expect(() => usageCostMicro('whisper-base', { audio_seconds: 1.5 })).toThrow(ProtocolError);
    expect(() => usageCostMicro('sdxl-turbo', { images: Number.MAX_SAFE_INTEGER })).toThrow(ProtocolError);
  });
});
