import { describe, expect, it } from 'vitest';
import { backoffDelay, ControlPlaneError, sleep, withRetries } from '../src/index.js';

describe('backoff and retries', () => {
  it('draws full-jitter delays under an exponential ceiling capped at capMs', () => {
    const policy = { baseMs: 1_000, capMs: 30_000 };
    expect([0, 1, 2, 5, 10, 60].map((attempt) => backoffDelay(attempt, { ...policy, random: () => 0.999999 }))).toEqual(
      [999, 1_999, 3_999, 29_999, 29_999, 29_999],
    );
    expect(backoffDelay(4, { ...policy, random: () => 0 })).toBe(0);
    const draws = Array.from({ length: 200 }, () => backoffDelay(3, policy));
    expect(Math.min(...draws)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...draws)).toBeLessThan(8_000);
    expect(new Set(draws).size).toBeGreaterThan(50);
  });

  it('retries retryable errors, honours Retry-After, and stops at a refusal or the deadline', async () => {
    const delays: number[] = [];
    let calls = 0;
    const flaky = async () => {
      calls++;
      if (calls === 1) throw new ControlPlaneError(503, 'no_capacity', 'busy');
      if (calls === 2) throw new ControlPlaneError(429, 'rate_limited', 'slow down', 30);
      return 'ok';
    };
    const r = await withRetries(flaky, { backoff: { baseMs: 1, capMs: 2 }, onRetry: (_e, d) => delays.push(d) });
    expect(r).toEqual({ ok: true, value: 'ok' });
    expect(delays[1]).toBe(30);

    const refused = await withRetries(async () => Promise.reject(new ControlPlaneError(404, 'not_found', 'gone')), {
      backoff: { baseMs: 1, capMs: 2 },
    });
    expect(refused).toMatchObject({ ok: false, final: 'refused', error: { status: 404 } });

    let attempts = 0;
    const started = Date.now();
    const late = await withRetries(
      async () => {
        attempts++;
        throw new ControlPlaneError(0, 'network_error', 'down');
      },
      { backoff: { baseMs: 20, capMs: 20, random: () => 0.99 }, deadlineMs: 100 },
    );
    expect(late).toMatchObject({ ok: false, final: 'deadline' });
    expect(Date.now() - started).toBeLessThan(500);
    expect(attempts).toBeGreaterThan(2);
  });

  it('sleep rejects as soon as its signal aborts', async () => {
    const controller = new AbortController();
    const started = Date.now();
    // Aborted once the sleep has begun.
    setImmediate(() => controller.abort(new Error('stop')));
    await expect(sleep(10_000, controller.signal)).rejects.toThrow('stop');
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it('a retry waiting out its backoff goes at once when woken, and stops listening once it has gone', async () => {
    const listening = new Set<() => void>();
    const sooner = (wake: () => void) => {
      listening.add(wake);
      return () => listening.delete(wake);
    };
    let calls = 0;
    const started = Date.now();
    const retried = withRetries(
      async () => {
        if (++calls === 1) throw new ControlPlaneError(0, 'network_error', 'the server is away');
        return 'delivered';
      },
      // Without the wake-up this retry would wait almost a minute.
      { backoff: { baseMs: 60_000, capMs: 60_000, random: () => 0.99 }, sooner },
    );
    for (const deadline = Date.now() + 5_000; listening.size === 0 && Date.now() < deadline;)
      await new Promise((r) => setTimeout(r, 5));
    expect(listening.size).toBe(1);
    for (const wake of [...listening]) wake();
    expect(await retried).toEqual({ ok: true, value: 'delivered' });
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(listening.size).toBe(0);
    // A sleep that ends by itself or by its signal stops listening too.
    await sleep(1, undefined, sooner);
    const controller = new AbortController();
    setImmediate(() => controller.abort(new Error('stop')));
    await expect(sleep(10_000, controller.signal, sooner)).rejects.toThrow('stop');
    expect(listening.size).toBe(0);
  });

  it('after a wake-up the backoff starts over: a try that fails again right after a reconnect is retried within baseMs', async () => {
    const listening = new Set<() => void>();
    const sooner = (wake: () => void) => {
      listening.add(wake);
      return () => listening.delete(wake);
    };
    const delays: number[] = [];
    let calls = 0;
    const started = Date.now();
    const retried = withRetries(
      async () => {
        calls++;
        // Away for four tries (the backoff grows to its cap), back but still starting for one.
        if (calls <= 5) throw new ControlPlaneError(0, 'network_error', 'the server is away');
        return 'delivered';
      },
      {
        backoff: { baseMs: 100, capMs: 60_000, random: () => 0.99 },
        sooner,
        onRetry: (_e, delay) => {
          delays.push(delay);
          // The channel reopens while the fourth retry waits out its backoff.
          if (delays.length === 4) setTimeout(() => [...listening].forEach((wake) => wake()), 20);
        },
      },
    );
    expect(await retried).toEqual({ ok: true, value: 'delivered' });
    // 99, 198, 396, 792 ms (woken early), then the first delay again: not 1,584 ms.
    expect(delays).toEqual([99, 198, 396, 792, 99]);
    expect(Date.now() - started).toBeLessThan(99 + 198 + 396 + 20 + 99 + 500);
    expect(listening.size).toBe(0);
  });
});
