import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayFixture, type GatewayFixture } from '../../../test/gateway-fixture.js';
import { watchPolls } from '../../../test/harness.js';

/** The group-commit writer flushes this rarely here, so anything that waits for a commit shows. */
const FLUSH_MS = 5_000;

/**
 * A streamed request's first tokens leave as soon as the node sends them: the node's events are
 * checked against the attempt this process runs (gateway/attempts.ts), not against the work row,
 * which the opening writes behind the dispatch (DESIGN.md section 4, revised 2026-11-24).
 */
describe('the first streamed token', () => {
  let f: GatewayFixture;
  beforeAll(async () => {
    f = await startGatewayFixture({ env: { SVC_WRITER_FLUSH_MS: String(FLUSH_MS) } });
    const polls = watchPolls(f.server.ctx);
    await f.addNode();
    // The node's channel stands with free slots: the request is handed over before its opening commits.
    await polls.until(1);
  });
  afterAll(() => f.close());

  it('reaches the client before the request is in the store, and the stream completes', async () => {
    const started = performance.now();
    const stream = await f.openai().chat.completions.create({
      model: 'tinyllama',
      messages: [{ role: 'user', content: 'one two three four' }],
      stream: true,
    });
    let firstAt: number | undefined;
    let id = '';
    let stored: number | undefined;
    let content = '';
    for await (const chunk of stream) {
      id = chunk.id;
      const delta = chunk.choices[0]?.delta.content ?? '';
      if (delta && firstAt === undefined) {
        firstAt = performance.now() - started;
        // Not even the request row is committed yet: its opening waits in the writer.
        const { rows } = await f.server.ctx.db.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM gateway_requests WHERE id = $1',
          [id],
        );
        stored = rows[0]?.n;
      }
      content += delta;
    }
    expect(stored).toBe(0);
    expect(firstAt).toBeLessThan(FLUSH_MS / 2);
    expect(content).toContain('one two three four');
    // The records follow: the request completes in the store with its receipt.
    await f.server.ctx.writer.settled();
    const { rows } = await f.server.ctx.db.query<{ status: string; receipt_id: string | null }>(
      'SELECT status, receipt_id FROM gateway_requests WHERE id = $1',
      [id],
    );
    expect(rows[0]?.status).toBe('completed');
    expect(rows[0]?.receipt_id).toMatch(/^rcpt_/);
  });
});
