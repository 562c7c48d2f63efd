import type { NodeClient } from './client.js';
import type { HeartbeatRequest } from './wire.js';
import type { AgentEvent } from './work.js';

/** A heartbeat to send now: `undefined` while the node is not registered. */
export type HeartbeatSnapshot = () => { client: NodeClient; body: HeartbeatRequest } | undefined;

export interface Heartbeat {
  /** Sends a heartbeat now, or right after the one in flight; resolves when that one is done. */
  beat(): Promise<void>;
  /** Resolves when no heartbeat is in flight. */
  idle(): Promise<void>;
}

/**
 * Heartbeats that never overlap: a beat asked for while one is in flight runs right after it,
 * so "at once when work starts" always reports the new work. Each answer's `cancel` ids go to
 * `cancel`; failures are warnings (the next beat retries).
 *
 * @example
 * const heartbeat = createHeartbeat(() => ({ client, body: { load: 0, active_work: [] } }), abortWork, log);
 * setInterval(() => void heartbeat.beat(), 10_000);
 */
export function createHeartbeat(
  snapshot: HeartbeatSnapshot,
  cancel: (workId: string) => void,
  emit: (event: AgentEvent) => void,
): Heartbeat {
  let inFlight: Promise<void> | undefined;
  let again = false;
  async function run(): Promise<void> {
    do {
      again = false;
      const current = snapshot();
      if (current === undefined) return;
      try {
        const answer = await current.client.heartbeat(current.body, { timeoutMs: 10_000 });
        for (const id of answer.cancel) cancel(id);
      } catch (err) {
        emit({ event: 'warning', message: `heartbeat failed: ${err instanceof Error ? err.message : String(err)}` });
      }
    } while (again);
  }
  return {
    beat(): Promise<void> {
      if (inFlight) {
        again = true;
        return inFlight;
      }
      inFlight = run().finally(() => (inFlight = undefined));
      return inFlight;
    },
    idle: async () => {
      await inFlight;
    },
  };
}
