import { describe, expect, it } from 'vitest';
import type { Handoff } from './handoff.js';
import type { WorkRow } from './store.js';
import { createJobSignal, type SignalledJob, type SignalledJobs } from './waiters.js';

/** The poll waiters read a job message only through the SignalledJobs the scheduler installs. */
describe('poll waiters: a job message goes through the installed SignalledJobs', () => {
  const db = { query: async () => ({ rows: [], rowCount: 0 }) } as never;
  const fakeSignal = async () => {
    let deliver: (payload: string) => void = () => undefined;
    const bus = {
      publish: async () => undefined,
      subscribe: async (_: string, handler: (p: string) => void) => ((deliver = handler), async () => undefined),
    };
    const { signal, close } = await createJobSignal({ bus, db });
    return { signal, close, message: (payload: string) => deliver(payload) };
  };
  const node = (id: string) => ({ id, country: 'CA', region: null, models: [], reputation: 1 }) as never;
  const row = { id: 'wrk_1' } as WorkRow;
  const settled = async (p: Promise<unknown>) =>
    Promise.race([p.then(() => true), new Promise((r) => setTimeout(() => r(false), 30))]);

  /** A SignalledJobs whose `find` answers from `jobs` and records what it was asked. */
  const installed = (jobs: Record<string, SignalledJob | 'not-pending'>) => {
    const asked: { db: unknown; jobId: string }[] = [];
    const impl: SignalledJobs = {
      find: async (q, jobId) => {
        asked.push({ db: q, jobId });
        return jobs[jobId];
      },
    };
    return { impl, asked };
  };

  it('hands a pending job to the longest-waiting node it accepts, in memory; a full node is passed over', async () => {
    const { signal, close, message } = await fakeSignal();
    const dispatched: string[] = [];
    const job: SignalledJob = {
      accepts: (n) => n.id !== 'nd_refused',
      dispatch: async (n, handoff: Handoff) => {
        dispatched.push(n.id ?? '');
        if (n.id === 'nd_full') {
          handoff.release();
          return 'full';
        }
        handoff.deliver([row]);
        return 'assigned';
      },
    };
    const { impl, asked } = installed({ job_1: job });
    signal.dispatchWith(impl);
    const refused = signal.wait(node('nd_refused'), 10_000);
    const full = signal.wait(node('nd_full'), 10_000);
    const taker = signal.wait(node('nd_taker'), 10_000);
    message('job_1');
    expect(await taker).toEqual([row]);
    expect(asked).toEqual([{ db, jobId: 'job_1' }]);
    expect(dispatched).toEqual(['nd_full', 'nd_taker']);
    // The full node's poll was given back (it looks again); the refused one was never touched.
    expect(await full).toBeUndefined();
    expect(await settled(refused)).toBe(false);
    signal.reserve('nd_refused')?.release();
    await close();
  });

  it('wakes nobody for a job no longer pending, every waiter for one it cannot find', async () => {
    const { signal, close, message } = await fakeSignal();
    const { impl, asked } = installed({ job_taken: 'not-pending' });
    signal.dispatchWith(impl);
    const a = signal.wait(node('nd_a'), 10_000);
    const b = signal.wait(node('nd_b'), 10_000);
    message('job_taken');
    expect(await settled(a)).toBe(false);
    message('job_unknown');
    expect(await a).toBeUndefined();
    expect(await b).toBeUndefined();
    expect(asked.map((x) => x.jobId)).toEqual(['job_taken', 'job_unknown']);
    await close();
  });

  it('before the scheduler installs it, a job message wakes every waiter to look in the store', async () => {
    const { signal, close, message } = await fakeSignal();
    const a = signal.wait(node('nd_a'), 10_000);
    const b = signal.wait(node('nd_b'), 10_000);
    message('job_1');
    expect(await a).toBeUndefined();
    expect(await b).toBeUndefined();
    await close();
  });
});
