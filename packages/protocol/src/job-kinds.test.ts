import { describe, expect, it } from 'vitest';
import { modelsOfType } from './catalogue.js';
import { JOB_KINDS, executionPool, findJobKind } from './job-kinds.js';

describe('JOB_KINDS', () => {
  it('is the DESIGN section 8 table', () => {
    expect(JOB_KINDS.map((k) => [k.kind, k.name, k.unit, k.pool, k.estimate_input])).toEqual([
      [1, 'llm_inference', 'token', 'public', 'estimated_tokens'],
      [2, 'embeddings', 'token', 'public', 'estimated_tokens'],
      [3, 'transcription', 'audio_second', 'public', 'estimated_duration_ms'],
      [4, 'image_generation', 'image', 'public', 'estimated_images'],
      [5, 'cpu_compute', 'core_second', 'public', 'estimated_duration_ms'],
      [6, 'gpu_compute', 'gpu_second', 'public', 'estimated_gpu_seconds'],
      [7, 'confidential_training', 'gpu_second', 'sovereign', 'estimated_gpu_seconds'],
      [8, 'scene_reconstruction', 'scene', 'public', 'estimated_scenes'],
      [9, 'repository_work', 'run', 'public', 'estimated_runs'],
      [10, 'data_processing', 'gb', 'public', 'estimated_data_gb'],
    ]);
  });

  it('has integer price ranges with min <= max', () => {
    for (const { price } of JOB_KINDS) {
      expect(Number.isSafeInteger(price.min_micro_cad) && Number.isSafeInteger(price.max_micro_cad)).toBe(true);
      expect(price.min_micro_cad).toBeLessThanOrEqual(price.max_micro_cad);
    }
  });

  it('fixes transcription and images at the spec prices', () => {
    expect(findJobKind(3)?.price).toEqual({ per_units: 1, min_micro_cad: 100, max_micro_cad: 100 });
    expect(findJobKind(4)?.price).toEqual({ per_units: 1, min_micro_cad: 30_000, max_micro_cad: 30_000 });
  });

  it('spans the catalogue token prices for kinds 1 and 2', () => {
    const range = (prices: number[]) => ({
      per_units: 1_000,
      min_micro_cad: Math.min(...prices),
      max_micro_cad: Math.max(...prices),
    });
    const chat = modelsOfType('chat').flatMap((m) => [
      m.price.micro_cad_per_unit,
      m.price.completion_micro_cad_per_unit ?? 0,
    ]);
    expect(findJobKind(1)?.price).toEqual(range(chat));
    const embed = modelsOfType('embeddings').map((m) => m.price.micro_cad_per_unit);
    expect(findJobKind(2)?.price).toEqual(range(embed));
  });

  it('finds by kind', () => {
    expect(findJobKind(7)?.name).toBe('confidential_training');
    expect(findJobKind(0)).toBeUndefined();
    expect(findJobKind(11)).toBeUndefined();
  });
});

describe('executionPool', () => {
  it('is sovereign for kind 7 or when a TEE is required', () => {
    expect(executionPool({ kind: 7 })).toBe('sovereign');
    expect(executionPool({ kind: 7, requires_tee: false })).toBe('sovereign');
    expect(executionPool({ kind: 1, requires_tee: true })).toBe('sovereign');
    expect(executionPool({ kind: 1 })).toBe('public');
    expect(executionPool({ kind: 6, requires_tee: false })).toBe('public');
  });
});
