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
