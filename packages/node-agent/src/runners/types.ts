import type { NodeClient } from '../client.js';
import type { Engine } from '../engines/interface.js';
import type { StreamSink } from '../stream-events.js';
import type { WorkItem } from '../wire.js';
import type { OciConfig } from './oci-config.js';

/** The engines a node runs on, by the catalogue id each one serves. */
export type EngineSet = Map<string, Engine>;

/** What a runner needs besides the work item. */
export interface RunContext {
  engines: EngineSet;
  /** The agent's data dir; the process runner makes `scratch/<work_id>` inside it. */
  dataDir: string;
  /** The host `process` runner runs buyer code only when the operator allowed it (`--allow-process-runner`). */
  allowProcessRunner: boolean;
  /** The `oci` runner (podman), when the node holds images for it: buyer code runs there by default. */
  oci?: OciConfig;
  /** Kind 9 runs only with a capsule (`svc node --capsule CMD`). */
  capsule?: { program: string; args: string[]; env?: Record<string, string> };
  /** Aborted when the work is cancelled or the agent shuts down past its grace period. */
  signal: AbortSignal;
  /** Fetches `payload_url` documents (audio for kind 3); global `fetch` by default. */
  fetch?: typeof fetch;
  /** The control plane's origin; `payload_url`s there may be on a private network. */
  trustedOrigin?: string;
  /** Where streamed work sends its events; without it `stream: true` work is refused. */
  events?: StreamSink;
  /** Kinds 8 and 10 run only with the operator's program for the kind (`svc node --runner 8=CMD`). */
  captureRunners?: ReadonlyMap<number, { program: string; args: string[] }>;
  /** Signed control-plane calls a runner makes itself (kinds 8 and 10 declare their outputs). */
  signedRequest?: NodeClient['signedRequest'];
}

/** A finished piece of work: the exact result bytes and how much work they took. */
export interface RunOutput {
  bytes: Buffer;
  /** How `bytes` travel in the result upload. */
  encoding: 'utf8' | 'base64';
  content_type: string;
  metering_units: number;
  usage: Record<string, number>;
  /** Engine name for the receipt metadata (`process` for the process runner). */
  engine: string;
  /** The runner buyer code ran in (`oci` or `process`), and the container image: receipt metadata. */
  runner?: string;
  image?: string;
  exit_code?: number;
}

/**
 * The work cannot be done here. `retryable` says whether another attempt (perhaps on another
 * node) might succeed; the agent reports it with `POST .../fail`.
 */
export class WorkError extends Error {
  override name = 'WorkError';
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

/**
 * A JSON result: the bytes are the UTF-8 of `JSON.stringify(value)`, which is what gets hashed,
 * signed and uploaded.
 *
 * @example
 * jsonOutput({ results: [] }, { metering_units: 0, usage: {}, engine: 'fake' });
 */
export function jsonOutput(
  value: unknown,
  meter: Pick<RunOutput, 'metering_units' | 'usage' | 'engine' | 'exit_code'>,
): RunOutput {
  return {
    bytes: Buffer.from(JSON.stringify(value), 'utf8'),
    encoding: 'utf8',
    content_type: 'application/json',
    ...meter,
  };
}

/**
 * The engine serving catalogue model `model`, or a non-retryable {@link WorkError}.
 *
 * @example
 * const engine = engineFor(ctx.engines, 'tinyllama');
 */
export function engineFor(engines: EngineSet, model: string | undefined): Engine {
  if (model === undefined || model === '') throw new WorkError('the work names no model', false);
  const engine = engines.get(model);
  if (engine === undefined) throw new WorkError(`model ${model} is not served by this node`, false);
  return engine;
}

/**
 * A non-empty array of strings from the payload, or a non-retryable {@link WorkError}.
 *
 * @example
 * const inputs = stringList(payload.inputs, 'inputs');
 */
export function stringList(value: unknown, field: string): string[] {
  if (!Array.isArray(value) || value.length === 0 || !value.every((v): v is string => typeof v === 'string')) {
    throw new WorkError(`payload.${field} must be a non-empty array of strings`, false);
  }
  return value;
}

/**
 * An optional finite number from the payload, or a non-retryable {@link WorkError}.
 *
 * @example
 * const max_tokens = optionalNumber(payload.max_tokens, 'max_tokens'); // number | undefined
 */
export function optionalNumber(value: unknown, field: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value))
    throw new WorkError(`payload.${field} must be a number`, false);
  return value;
}

/**
 * A count reported by an engine (tokens, images) as a metering integer: engines are not trusted
 * to hand back non-negative integers, and SVC1 signs an integer.
 *
 * @example
 * meterCount(12.7); // 12
 */
export function meterCount(value: number): number {
  return Number.isFinite(value) && value > 0 ? Math.floor(value) : 0;
}

/**
 * The catalogue model of a work item: the item's `model`, else `payload.model`.
 *
 * @example
 * workModel({ ...item, model: undefined, payload: { model: 'phi-4' } }); // 'phi-4'
 */
export function workModel(item: WorkItem): string | undefined {
  return item.model ?? (typeof item.payload.model === 'string' ? item.payload.model : undefined);
}
