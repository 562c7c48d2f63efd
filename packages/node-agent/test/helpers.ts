import { getEventListeners } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createNodeAgent,
  type AgentEvent,
  type EngineSet,
  type NodeAgent,
  type NodeAgentOptions,
} from '../src/index.js';

/** Polls `predicate` every 10 ms until it holds; fails after `timeoutMs`. */
export async function eventually(predicate: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Fast clocks for tests: short polls and heartbeats, millisecond backoffs. */
export const FAST_TIMING = {
  waitMs: 200,
  heartbeatMs: 100,
  graceMs: 5_000,
  pollBackoff: { baseMs: 5, capMs: 20 },
  uploadBackoff: { baseMs: 5, capMs: 20 },
  uploadDeadlineMs: 5_000,
};

export interface TestAgent {
  agent: NodeAgent;
  dataDir: string;
  events: AgentEvent[];
  workEvents: () => Extract<AgentEvent, { event: 'work' }>[];
  cleanup: () => Promise<void>;
}

const cleanups: (() => Promise<void>)[] = [];

/** Removes every data dir and stops every agent made by {@link makeAgent}. */
export async function cleanupAgents(): Promise<void> {
  await Promise.all(cleanups.splice(0).map((c) => c()));
}

/**
 * An agent against a control plane (the fake, or a real test server), with its own temp data dir
 * and fast timing.
 *
 * @example
 * const t = await makeAgent(cp, { engines: new Map([['tinyllama', engine]]) });
 */
export async function makeAgent(
  cp: { url: string; apiKey: string },
  options: Partial<NodeAgentOptions> & { engines?: EngineSet } = {},
): Promise<TestAgent> {
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), 'svc-node-agent-')));
  const events: AgentEvent[] = [];
  const agent = createNodeAgent({
    server: cp.url,
    apiKey: cp.apiKey,
    dataDir,
    country: 'CA',
    region: 'ca-central',
    ...options,
    timing: { ...FAST_TIMING, ...options.timing },
    onEvent: (e) => events.push(e),
  });
  const cleanup = async () => {
    await agent.stop({ graceMs: 0 });
    await rm(dataDir, { recursive: true, force: true });
  };
  cleanups.push(cleanup);
  return {
    agent,
    dataDir,
    events,
    workEvents: () => events.filter((e): e is Extract<AgentEvent, { event: 'work' }> => e.event === 'work'),
    cleanup,
  };
}

/**
 * What a signal still holds of the calls that followed it: its `abort` listeners plus, on Node
 * versions whose `AbortSignal.any` keeps its composites in their sources (Node 20: a set under the
 * internal symbol `kDependantSignals`, nodejs/node#55351), those composites. Zero once every call
 * that followed it has ended.
 */
export function followersOf(signal: AbortSignal): number {
  const dependants = Object.getOwnPropertySymbols(signal).find((s) => s.description === 'kDependantSignals');
  // Node's own SafeSet, not an instance of the global Set: read its size.
  const set =
    dependants === undefined ? undefined : (signal as unknown as Record<symbol, { size?: unknown }>)[dependants];
  const size = typeof set?.size === 'number' ? set.size : 0;
  return getEventListeners(signal, 'abort').length + size;
}
