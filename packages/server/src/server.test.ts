import { afterEach, describe, expect, it } from 'vitest';
import { startTestServer } from '../test/harness.js';

describe('graceful shutdown', () => {
  let stop: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await stop?.().catch(() => undefined);
    stop = undefined;
  });

  it('lets an in-flight request finish, then refuses new connections', async () => {
    let release: () => void = () => undefined;
    let entered: () => void = () => undefined;
    const reached = new Promise<void>((resolve) => (entered = resolve));
    const server = await startTestServer({
      extraRoutes(app) {
        app.get('/__probe/slow', { config: { auth: { public: true } }, schema: { hide: true } }, async () => {
          const released = new Promise<void>((resolve) => (release = resolve));
          entered();
          await released;
          return { finished: true };
        });
      },
    });
    stop = server.stop;
    const inFlight = fetch(`${server.url}/__probe/slow`).then((r) => r.json());
    // Close only once the request is inside its handler (a fixed sleep lost this race under load).
    await reached;
    const closing = server.close();
    // New connections are refused as soon as the listener is closed; allow that a moment under load.
    const refused = async () => {
      const deadline = Date.now() + 10_000;
      while (Date.now() < deadline) {
        const outcome = await fetch(`${server.url}/api/v1/health`, { signal: AbortSignal.timeout(2_000) }).then(
          () => 'answered',
          (err: unknown) => (err instanceof Error && err.name === 'TimeoutError' ? 'answered' : 'refused'),
        );
        if (outcome === 'refused') return true;
        await new Promise((r) => setTimeout(r, 20));
      }
      return false;
    };
    expect(await refused()).toBe(true);
    release();
    expect(await inFlight).toEqual({ finished: true });
    await closing;
    expect(
      await server.ctx.db.query('SELECT 1').then(
        () => 'open',
        () => 'closed',
      ),
    ).toBe('closed');
  });
});
