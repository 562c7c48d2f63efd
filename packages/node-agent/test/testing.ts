/** Test helpers for packages that drive the node agent (`@svc/node-agent/testing`). Tests only. */
export {
  startFakeControlPlane,
  type FakeControlPlane,
  type FakeWork,
  type RecordedRequest,
} from './fake-control-plane.js';
export { createFakeEngine, type FakeEngine, type FakeEngineOptions } from './fake-engine.js';
export {
  startOpenAITestServer,
  type OpenAITestRequest,
  type OpenAITestServer,
  type OpenAITestServerFailure,
  type OpenAITestServerOptions,
} from './openai-test-server.js';
export { createPng, createSineWav, hashedEmbedding, PNG_SIGNATURE } from './openai-test-server-content.js';
export { createTinyGguf, type TinyGgufInfo, type TinyGgufOptions } from '../src/engines/tiny-gguf.js';
