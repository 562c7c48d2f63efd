import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.js';

describe('loadConfig: SVC_MCP_ALLOWED_ORIGINS', () => {
  it('is empty by default and keeps normalised origins', () => {
    expect(loadConfig({}, {}).mcpAllowedOrigins).toEqual([]);
    expect(
      loadConfig({}, { SVC_MCP_ALLOWED_ORIGINS: 'https://app.example.com, http://localhost:5173/' }).mcpAllowedOrigins,
    ).toEqual(['https://app.example.com', 'http://localhost:5173']);
  });

  it.each(['ftp://x.example', 'https://app.example.com/path', 'not a url'])('refuses %s', (value) => {
    expect(() => loadConfig({}, { SVC_MCP_ALLOWED_ORIGINS: value })).toThrow(ConfigError);
    expect(() => loadConfig({}, { SVC_MCP_ALLOWED_ORIGINS: value })).toThrow(/SVC_MCP_ALLOWED_ORIGINS/);
  });
});

describe('loadConfig: SVC_PGLITE_BUFFERS_MB', () => {
  it("is PGlite's own 128 MB by default and takes a size in MB", () => {
    expect(loadConfig({}, {}).pgliteBuffersMb).toBe(128);
    expect(loadConfig({}, { SVC_PGLITE_BUFFERS_MB: '16' }).pgliteBuffersMb).toBe(16);
  });

  it.each(['0', '1025', '16MB', '-1', '1.5'])('refuses %s', (value) => {
    expect(() => loadConfig({}, { SVC_PGLITE_BUFFERS_MB: value })).toThrow(/SVC_PGLITE_BUFFERS_MB must be an integer/);
  });
});

describe('loadConfig: SVC_CHANNEL_LOSS_GRACE_MS, SVC_POLL_HANG_UP_GRACE_MS', () => {
  it('are 2 s by default and take a time in ms', () => {
    expect(loadConfig({}, {})).toMatchObject({ channelLossGraceMs: 2_000, pollHangUpGraceMs: 2_000 });
    expect(loadConfig({}, { SVC_CHANNEL_LOSS_GRACE_MS: '500', SVC_POLL_HANG_UP_GRACE_MS: '300' })).toMatchObject({
      channelLossGraceMs: 500,
      pollHangUpGraceMs: 300,
    });
  });

  it.each(['SVC_CHANNEL_LOSS_GRACE_MS', 'SVC_POLL_HANG_UP_GRACE_MS'])('%s refuses 0 and non-integers', (name) => {
    for (const value of ['0', '2s', '60001'])
      expect(() => loadConfig({}, { [name]: value })).toThrow(new RegExp(`${name} must be an integer`));
  });
});
