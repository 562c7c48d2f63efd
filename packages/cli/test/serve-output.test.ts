import { PassThrough } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { logFormat, logStream, startupLines } from '../src/serve-output.js';

describe('svc serve output', () => {
  it('logs readable lines at a terminal and JSON to a pipe or file', () => {
    expect(logFormat({ isTTY: true })).toBe('pretty');
    expect(logFormat({ isTTY: false })).toBe('json');
    expect(logFormat({})).toBe('json');
    expect(logStream('json')).toBeUndefined();
  });

  it('the pretty stream turns a JSON log line into a readable one', async () => {
    const out = new PassThrough();
    let text = '';
    const written = new Promise<void>((resolve) =>
      out.on('data', (d: Buffer) => {
        text += d.toString();
        if (text.includes('port')) resolve();
      }),
    );
    const stream = logStream('pretty', out);
    if (!stream) throw new Error('no pretty stream');
    pino({ level: 'info' }, stream).info({ port: 8080 }, 'server started');
    await written;
    expect(text).toMatch(/^\[\d\d:\d\d:\d\d\] INFO: server started\n\s+port: 8080\n/);
    expect(text).not.toContain('{"level"');
  });

  it('first says where it listens, where the dashboard is and how to start a node', () => {
    expect(startupLines({ url: 'http://127.0.0.1:8080', store: 'pglite' })).toEqual([
      'svc serve: listening on http://127.0.0.1:8080 (store: pglite)',
      '  dashboard:    http://127.0.0.1:8080/',
      '  start a node: npx svc node --server http://127.0.0.1:8080 --api-key <operator key>',
      '                (an API key with the operator scope: dashboard > Keys, or POST /api/v1/auth/api-keys)',
    ]);
    const lines = startupLines({ url: 'http://0.0.0.0:8080', publicUrl: 'https://svc.example', store: 'postgres' });
    expect(lines[1]).toBe('  dashboard:    https://svc.example/');
    expect(lines[2]).toBe('  start a node: npx svc node --server https://svc.example --api-key <operator key>');
  });
});
