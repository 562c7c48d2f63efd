import { Writable } from 'node:stream';
import { buildApp, type App } from '../src/app.js';
import { closeContext, createContext } from '../src/context.js';
import type { ServiceContext } from '../src/service-context.js';
import { loadConfig, type Config } from '../src/platform/config.js';
import { startServer, type RunningServer } from '../src/server.js';
import { createTestStore, type TestStore } from './test-store.js';

export { TEST_STORE_KIND, createTestStore, type TestStore } from './test-store.js';
export { createTestNode, type TestNode, type WorkItem } from './test-node.js';
export { svc1VerifiesIndependently } from './independent-svc1.js';
export { FAKE_STRIPE_WEBHOOK_SECRET, signStripeEvent, startFakeStripe, type FakeStripe } from './fake-stripe.js';
export { eventually, watchPolls } from './waits.js';
export { startTestS3, type TestS3 } from './s3-server.js';
export { sendChunked, type RawAnswer } from './raw-http.js';

/** Log lines a test app wrote, for asserting that secrets never reach them. */
export class LogCapture extends Writable {
  readonly lines: string[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void): void {
    this.lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    done();
  }
  text(): string {
    return this.lines.join('\n');
  }
}

export interface TestApp {
  app: App;
  ctx: ServiceContext;
  store: TestStore;
  logs: LogCapture;
  close(): Promise<void>;
}

function testConfig(store: TestStore, env: Record<string, string>): Config {
  return loadConfig(
    { 'data-dir': store.dataDir, port: '0' },
    // Tests sign up many organizations from one address; the sign-up limit has its own test.
    {
      SVC_LOG_LEVEL: 'info',
      SVC_ALLOW_PRIVATE_EGRESS: '1',
      SVC_SIGNUP_RATE_LIMIT_BURST: '1000000',
      SVC_PGLITE_BUFFERS_MB: String(store.pgliteBuffersMb),
      ...env,
      ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
    },
  );
}

/**
 * Boots the app in-process (no socket; use `app.inject`) on a fresh store.
 *
 * @example
 * const t = await createTestApp();
 * const res = await t.app.inject({ method: 'GET', url: '/api/v1/health' });
 * await t.close();
 */
export async function createTestApp(
  options: {
    env?: Record<string, string>;
    store?: TestStore;
    extraRoutes?: (app: App) => void;
    /** False for a test that runs the lease sweep or webhook sends itself (`startBackgroundTasks`). */
    periodicTasks?: boolean;
  } = {},
): Promise<TestApp> {
  const store = options.store ?? (await createTestStore());
  const logs = new LogCapture();
  const ctx = await createContext(testConfig(store, options.env ?? {}), {
    logStream: logs,
    periodicTasks: options.periodicTasks,
  });
  const app = await buildApp(ctx, { extraRoutes: options.extraRoutes });
  return {
    app,
    ctx,
    store,
    logs,
    async close() {
      await app.close();
      await closeContext(ctx);
      if (!options.store) await store.drop();
    },
  };
}

/** Like createTestApp, but listening on an ephemeral loopback port (for real HTTP clients). */
export async function startTestServer(
  options: { env?: Record<string, string>; store?: TestStore; extraRoutes?: (app: App) => void } = {},
): Promise<RunningServer & { store: TestStore; logs: LogCapture; stop(): Promise<void> }> {
  const store = options.store ?? (await createTestStore());
  const logs = new LogCapture();
  const server = await startServer(testConfig(store, options.env ?? {}), {
    logStream: logs,
    extraRoutes: options.extraRoutes,
  });
  return {
    ...server,
    store,
    logs,
    async stop() {
      await server.close();
      if (!options.store) await store.drop();
    },
  };
}

/** A signed-up buyer: the first key, a session token, and their ids. */
export interface TestBuyer {
  apiKey: string;
  token: string;
  buyerId: string;
  orgId: string;
  email: string;
  password: string;
}

let buyerCounter = 0;

/**
 * Signs up a fresh buyer through the real route.
 *
 * @example
 * const alice = await signUp(t.app);
 * await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(alice.apiKey) });
 */
export async function signUp(
  app: App,
  overrides: { email?: string; password?: string; name?: string } = {},
): Promise<TestBuyer> {
  buyerCounter += 1;
  const email = overrides.email ?? `buyer${buyerCounter}-${Date.now()}@example.test`;
  const password = overrides.password ?? 'correct horse battery staple';
  const res = await app.inject({
    method: 'POST',
    url: '/api/v1/auth/signup',
    payload: { email, password, name: overrides.name ?? `Buyer ${buyerCounter}` },
  });
  if (res.statusCode !== 201) throw new Error(`signup failed: ${res.statusCode} ${res.body}`);
  const body = res.json() as { api_key: string; token: string; buyer_id: string; organization: { id: string } };
  return {
    apiKey: body.api_key,
    token: body.token,
    buyerId: body.buyer_id,
    orgId: body.organization.id,
    email,
    password,
  };
}

/** `{authorization: 'Bearer <credential>'}` */
export function bearer(credential: string): { authorization: string } {
  return { authorization: `Bearer ${credential}` };
}

/**
 * Creates a key with the given scopes for the buyer and returns the full key. Uses the buyer's
 * session (an owner's session may grant any scope; their `buyer` key could not grant `operator`).
 */
export async function createKey(app: App, buyer: TestBuyer, scopes: string[], label = 'test'): Promise<string> {
  const res = await app.inject({
    method: 'POST',
    url: '/api/v1/auth/api-keys',
    headers: bearer(buyer.token),
    payload: { label, scopes },
  });
  if (res.statusCode !== 201) throw new Error(`key creation failed: ${res.statusCode} ${res.body}`);
  return (res.json() as { api_key: string }).api_key;
}
export { createAttestationVerifier } from '../src/platform/attestation.js';
