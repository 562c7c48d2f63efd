export { createNodeAgent, DEFAULT_TIMING, type AgentTiming, type NodeAgent, type NodeAgentOptions } from './agent.js';
export {
  attestWithTsm,
  collectTsmReport,
  tsmAvailable,
  TSM_REPORT_ROOT,
  vcekFromAuxblob,
  type AttestationOutcome,
  type TsmReport,
} from './attestation.js';
export { abortReason, backoffDelay, sleep, type BackoffPolicy } from './backoff.js';
export {
  ControlPlaneError,
  createNodeClient,
  type CallOptions,
  type NodeClient,
  type NodeClientOptions,
} from './client.js';
export { createHeartbeat, type Heartbeat, type HeartbeatSnapshot } from './heartbeat.js';
export { deliverEntry, withRetries, type Delivery, type RetryOptions, type RetryResult } from './delivery.js';
export { writeFileAtomic } from './fs-atomic.js';
export {
  IdentityError,
  loadOrCreateIdentity,
  NODE_KEY_FILE,
  NODE_RECORD_FILE,
  readNodeRecord,
  writeNodeRecord,
  type NodeIdentity,
  type NodeRecord,
} from './identity.js';
export {
  createOutbox,
  JOURNAL_ENTRIES,
  outboxWorkIds,
  resultBody,
  sealResult,
  type Outbox,
  type OutboxEntry,
} from './outbox.js';
export { createStreamSink, type StreamSink, type StreamSinkOptions } from './stream-events.js';
export * from './runners/index.js';
export { readSystemInfo, type SystemInfo } from './system-info.js';
export * from './wire.js';
export {
  deliverWork,
  processWork,
  reportFailure,
  type AgentEvent,
  type TrackedWork,
  type WorkDeps,
  type WorkOutcome,
} from './work.js';
export * from './engines/interface.js';
export { createOpenAIUpstreamEngine, type OpenAIUpstreamOptions } from './engines/openai-upstream.js';
export { createLlamaCppEngine, probeLlamaCpp, type LlamaCppEngineOptions } from './engines/llama-cpp.js';
