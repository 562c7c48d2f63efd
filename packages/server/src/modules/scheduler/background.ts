import { EventEmitter } from 'node:events';
import type { ServiceContext } from '../../context.js';
import { sendDueWebhooks } from '../jobs/delivery.js';
import { forgetOldSignatures } from '../nodes/store.js';
import { sweepExpiredLeases } from './service.js';

/** Wakes long-polling nodes in this process when any instance says a job became eligible. */
export interface JobSignal {
  /** Resolves after `ms`, at the next job signal, or when `signal` aborts, whichever is first. */
  wait(ms: number, signal?: AbortSignal): Promise<void>;
}

export async function createJobSignal(ctx: Pick<ServiceContext, 'bus'>): Promise<{ signal: JobSignal; close: () => Promise<void> }> {
  const events = new EventEmitter();
  events.setMaxListeners(0);
  const unsubscribe = await ctx.bus.subscribe('jobs', () => events.emit('jobs'));
  const signal: JobSignal = {
    wait(ms, abort) {
      return new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          events.off('jobs', done);
          abort?.removeEventListener('abort', done);
          resolve();
        };
        const timer = setTimeout(done, ms);
        events.once('jobs', done);
        abort?.addEventListener('abort', done, { once: true });
      });
    },
  };
  return { signal, close: unsubscribe };
}

/**
 * Periodic work of every instance: expire leases (every second), send due webhooks (every
 * second), forget old request signatures (every minute). Each tick is safe to run on several
 * instances at once. Returns a function that stops them and waits for a running tick.
 */
export function startBackgroundTasks(ctx: ServiceContext, options: { intervalMs?: number } = {}): () => Promise<void> {
  const interval = options.intervalMs ?? 1000;
  let running: Promise<void> = Promise.resolve();
  let ticks = 0;
  let stopped = false;
  const tick = async () => {
    ticks++;
    await sweepExpiredLeases(ctx);
    await sendDueWebhooks(ctx);
    if (ticks % 60 === 0) await forgetOldSignatures(ctx.db);
  };
  const timer = setInterval(() => {
    if (stopped) return;
    running = running.then(tick).catch((err: unknown) => ctx.log.error({ err }, 'background task failed'));
  }, interval);
  timer.unref();
  return async () => {
    stopped = true;
    clearInterval(timer);
    await running;
  };
}
