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
    const server = await startTestServer({
      extraRoutes(app) {
        app.get('/__probe/slow', { config: { auth: { public: true } }, schema: { hide: true } }, async () => {
          await new Promise<void>((resolve) => (release = resolve));
          return { finished: true };
        });
      },
    });
    stop = server.stop;
    const inFlight = fetch(`${server.url}/__probe/slow`).then((r) => r.json());
    await new Promise((r) => setTimeout(r, 100));
    const closing = server.close();
    await new Promise((r) => setTimeout(r, 100));
    await expect(fetch(`${server.url}/api/v1/health`)).rejects.toThrow();
    release();
    expect(await inFlight).toEqual({ finished: true });
    await closing;
    expect(await server.ctx.db.query('SELECT 1').then(() => 'open', () => 'closed')).toBe('closed');
  });
});
