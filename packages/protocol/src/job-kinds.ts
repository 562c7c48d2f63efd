/** Name of a marketplace job kind. */
export type JobKindName =
  | 'llm_inference'
  | 'embeddings'
  | 'transcription'
  | 'image_generation'
  | 'cpu_compute'
  | 'gpu_compute'
  | 'confidential_training'
  | 'scene_reconstruction'
  | 'repository_work'
  | 'data_processing';

/** What a job kind meters (and a node's receipt counts in `metering_units`). */
export type MeteringUnit = 'token' | 'audio_second' | 'image' | 'core_second' | 'gpu_second' | 'scene' | 'run' | 'gb';

/** The estimate request field that carries a kind's main quantity. */
export type EstimateField =
  | 'estimated_tokens'
  | 'estimated_duration_ms'
  | 'estimated_images'
  | 'estimated_gpu_seconds'
  | 'estimated_scenes'
  | 'estimated_runs'
  | 'estimated_data_gb';

export type ExecutionPool = 'public' | 'sovereign';

/** One row of the job kinds table. */
export interface JobKind {
  readonly kind: number;
  readonly name: JobKindName;
  readonly unit: MeteringUnit;
  readonly pool: ExecutionPool;
  /** The field an estimate reads, and how many of its values make one unit (1,000 ms = 1 s). */
  readonly estimate_input: EstimateField;
  readonly input_per_unit: number;
  /** Quantity assumed when the request leaves `estimate_input` out. */
  readonly default_input: number;
  /** Price range in integer micro-CAD for `per_units` units (1,000 for tokens, else 1). */
  readonly price: { readonly per_units: number; readonly min_micro_cad: number; readonly max_micro_cad: number };
}

function row(
  kind: number,
  name: JobKindName,
  unit: MeteringUnit,
  estimate: [EstimateField, number, number],
  price: [number, number, number],
): JobKind {
  const [estimate_input, input_per_unit, default_input] = estimate;
  const [per_units, min_micro_cad, max_micro_cad] = price;
  const pool: ExecutionPool = kind === 7 ? 'sovereign' : 'public';
  return Object.freeze({
    kind,
    name,
    unit,
    pool,
    estimate_input,
    input_per_unit,
    default_input,
    price: Object.freeze({ per_units, min_micro_cad, max_micro_cad }),
  });
}

/**
 * The job kinds, 1 to 10. Columns: estimate field, its values per unit, its default; price per
 * how many units, min and max micro-CAD. Transcription and images are fixed by the spec:
 * 0.006 CAD per audio minute (100 micro-CAD per second) and 0.03 CAD per image.
 */
export const JOB_KINDS: readonly JobKind[] = Object.freeze([
  row(1, 'llm_inference', 'token', ['estimated_tokens', 1, 1_000], [1_000, 50, 1_200]),
  row(2, 'embeddings', 'token', ['estimated_tokens', 1, 1_000], [1_000, 20, 40]),
  row(3, 'transcription', 'audio_second', ['estimated_duration_ms', 1_000, 60_000], [1, 100, 100]),
  row(4, 'image_generation', 'image', ['estimated_images', 1, 1], [1, 30_000, 30_000]),
  row(5, 'cpu_compute', 'core_second', ['estimated_duration_ms', 1_000, 60_000], [1, 10, 30]),
  row(6, 'gpu_compute', 'gpu_second', ['estimated_gpu_seconds', 1, 60], [1, 150, 900]),
  row(7, 'confidential_training', 'gpu_second', ['estimated_gpu_seconds', 1, 60], [1, 400, 1_500]),
  row(8, 'scene_reconstruction', 'scene', ['estimated_scenes', 1, 1], [1, 500_000, 5_000_000]),
  row(9, 'repository_work', 'run', ['estimated_runs', 1, 1], [1, 100_000, 2_000_000]),
  row(10, 'data_processing', 'gb', ['estimated_data_gb', 1, 1], [1, 10_000, 50_000]),
]);

/**
 * The job kind with this number, or `undefined`.
 *
 * @example
 * findJobKind(3)?.unit; // 'audio_second'
 */
export function findJobKind(kind: number): JobKind | undefined {
  return JOB_KINDS.find((row) => row.kind === kind);
}

/**
 * `sovereign` when the kind is 7 (confidential training) or the job requires a TEE, else
 * `public`.
 *
 * @example
 * executionPool({ kind: 1, requires_tee: true }); // 'sovereign'
 */
export function executionPool(job: { kind: number; requires_tee?: boolean | undefined }): ExecutionPool {
  return job.kind === 7 || job.requires_tee === true ? 'sovereign' : 'public';
}
