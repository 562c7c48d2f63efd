import type { WorkItem } from '../wire.js';
import { runEmbeddings, runImageGeneration, runLlmInference, runTranscription } from './engine-jobs.js';
import { runGatewayChat, runGatewayEmbeddings, runGatewayImage, runGatewayTranscription } from './gateway.js';
import { runCaptureJob } from './capture.js';
import { runComputeJob } from './compute-job.js';
import { runRepositoryWork } from './repository-work.js';
import { WorkError, type RunContext, type RunOutput } from './types.js';

export {
  fetchPayload,
  PAYLOAD_FETCH_TIMEOUT_MS,
  PAYLOAD_MAX_BYTES,
  type FetchPayloadOptions,
} from './fetch-payload.js';
export { runEmbeddings, runImageGeneration, runLlmInference, runTranscription } from './engine-jobs.js';
export {
  runGatewayChat,
  runGatewayEmbeddings,
  runGatewayImage,
  runGatewayTranscription,
  STREAMING_UNSUPPORTED,
} from './gateway.js';
export {
  PROCESS_DEFAULT_TIMEOUT_S,
  PROCESS_MAX_TIMEOUT_S,
  PROCESS_OUTPUT_LIMIT,
  PROCESS_RUNNER_DISABLED,
  runProcess,
  runProcessJob,
  type ProcessResult,
  type RunProcessOptions,
} from './process-runner.js';
export { runCaptureJob, type CaptureRunner } from './capture.js';
export { CAPSULE_DISABLED, runRepositoryWork, type CapsuleConfig } from './repository-work.js';
export { detectTooling, missingTooling } from './tooling.js';
export {
  buyerRunner,
  chooseImage,
  containerLimits,
  CONTAINER_MAX_PIDS,
  networkGranted,
  NO_NETWORK,
  NO_RUNNER,
  runComputeJob,
  type BuyerRunner,
} from './compute-job.js';
export {
  imageExists,
  listOutputFiles,
  loadImageArchive,
  removeLeftoverContainers,
  runContainer,
  shareTree,
  type ContainerLimits,
  type ContainerResult,
  type OciConfig,
  type RunContainerOptions,
} from './oci-runner.js';
export {
  CDI_SPEC_DIRS,
  cdiGpuReady,
  detectOciRunner,
  ROOT_USERNS_BASE,
  type DetectOptions,
  type OciRunnerProbe,
} from './oci-detect.js';
export {
  engineFor,
  jsonOutput,
  meterCount,
  WorkError,
  workModel,
  type EngineSet,
  type RunContext,
  type RunOutput,
} from './types.js';

type Runner = (item: WorkItem, ctx: RunContext) => Promise<RunOutput>;

const JOB_RUNNERS = new Map<number, Runner>([
  [1, runLlmInference],
  [2, runEmbeddings],
  [3, runTranscription],
  [4, runImageGeneration],
  [5, runComputeJob],
  [6, runComputeJob],
  // Kind 7 (confidential training) is kind 6 inside a TEE: the server sends it only to attested nodes.
  [7, runComputeJob],
  [8, runCaptureJob],
  [9, runRepositoryWork],
  [10, runCaptureJob],
]);

const GATEWAY_RUNNERS = new Map<string, Runner>([
  ['chat', runGatewayChat],
  ['embeddings', runGatewayEmbeddings],
  ['transcription', runGatewayTranscription],
  ['image', runGatewayImage],
]);

/**
 * Runs one work item: marketplace jobs by `kind` (1-4 on the engines, buyer code of 5-8, 10 and
 * kind 9's capsule in the `oci` runner, or the process runner when allowed), gateway requests by `type` (`chat`, streamed when `ctx.events` is given,
 * `embeddings`, `transcription`, `image`). Anything this agent cannot do is a non-retryable
 * {@link WorkError}.
 *
 * @example
 * const out = await runJob(item, { engines, dataDir, allowProcessRunner: false, signal });
 * sha256Hex(out.bytes); // the result_hash to sign
 */
export async function runJob(item: WorkItem, ctx: RunContext): Promise<RunOutput> {
  if (item.type === 'job') {
    const runner = item.kind === undefined ? undefined : JOB_RUNNERS.get(item.kind);
    if (runner === undefined)
      throw new WorkError(`job kind ${String(item.kind)} is not supported by this agent version`, false);
    return runner(item, ctx);
  }
  const runner = GATEWAY_RUNNERS.get(item.type);
  if (runner === undefined)
    throw new WorkError(`gateway work of type ${item.type} is not supported by this agent version`, false);
  return runner(item, ctx);
}
