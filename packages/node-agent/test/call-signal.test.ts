import { describe, expect, it } from 'vitest';
import { callSignal } from '../src/call-signal.js';
import { followersOf } from './helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('callSignal', () => {
  it('aborts with a TimeoutError when the time is up', async () => {
    const stop = new AbortController();
    const call = callSignal(20, [stop.signal]);
    expect(call.signal.aborted).toBe(false);
    await sleep(60);
    expect(call.signal.aborted).toBe(true);
    expect(call.timedOut()).toBe(true);
    expect((call.signal.reason as DOMException).name).toBe('TimeoutError');
    // Timed out, it no longer follows the source.
    stop.abort();
    expect(call.signal.reason).toBeInstanceOf(DOMException);
  });

  it('aborts with the reason of the first source that aborts, and stops following the others', () => {
    const stop = new AbortController();
    const caller = new AbortController();
    const call = callSignal(10_000, [stop.signal, undefined, caller.signal]);
    const reason = new Error('caller gave up');
    caller.abort(reason);
    expect(call.signal.aborted).toBe(true);
    expect(call.signal.reason).toBe(reason);
    expect(call.timedOut()).toBe(false);
    stop.abort(new Error('later'));
    expect(call.signal.reason).toBe(reason);
  });

  it('starts aborted when a source already is, with its reason', () => {
    const stop = new AbortController();
    stop.abort(new Error('stopping'));
    const call = callSignal(10_000, [stop.signal]);
    expect(call.signal.aborted).toBe(true);
    expect((call.signal.reason as Error).message).toBe('stopping');
    expect(call.timedOut()).toBe(false);
  });

  it('never aborts once done: the timer is cleared and the source keeps nothing of the call', async () => {
    const stop = new AbortController();
    const calls = Array.from({ length: 1000 }, () => callSignal(20, [stop.signal]));
    // One listener for every call in flight: no leak warning past ten.
    expect(followersOf(stop.signal)).toBe(1);
    for (const call of calls) {
      call.done();
      call.done();
    }
    await sleep(60);
    stop.abort();
    expect(calls.some((c) => c.signal.aborted || c.timedOut())).toBe(false);
  });

  it('aborts every call in flight when a source many follow aborts, and none that ended', () => {
    const stop = new AbortController();
    const calls = Array.from({ length: 50 }, () => callSignal(10_000, [stop.signal]));
    const ended = calls.slice(0, 10);
    for (const call of ended) call.done();
    stop.abort(new Error('stopping'));
    expect(calls.slice(10).every((c) => (c.signal.reason as Error | undefined)?.message === 'stopping')).toBe(true);
    expect(ended.some((c) => c.signal.aborted)).toBe(false);
    expect(callSignal(10_000, [stop.signal]).signal.aborted).toBe(true);
  });
});
