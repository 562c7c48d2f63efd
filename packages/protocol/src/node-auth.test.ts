import { describe, expect, it } from 'vitest';
import { ProtocolError } from './errors.js';
import { canonicalJson } from './jcs.js';
import { sha256Hex } from './keys.js';
import { registerMessage, requestMessage } from './node-auth.js';
import { signHex, verifyHex } from './signature.js';
import { NODE_PUBLIC_KEY_HEX, nodeKey } from './test-keys.js';

describe('registerMessage', () => {
  const body = { pubkey: NODE_PUBLIC_KEY_HEX, gpu_model: 'RTX 4090', cpu_cores: 16 };

  it('is the domain line, the pubkey and the hash of the canonical body', () => {
    const text = registerMessage(NODE_PUBLIC_KEY_HEX, body).toString('utf8');
    expect(text).toBe(`SVC-NODE-REGISTER-v1\n${NODE_PUBLIC_KEY_HEX}\n${sha256Hex(canonicalJson(body))}`);
  });

  it('ignores the signature property and key order', () => {
    const withSignature = { cpu_cores: 16, signature: 'ab', gpu_model: 'RTX 4090', pubkey: NODE_PUBLIC_KEY_HEX };
    expect(registerMessage(NODE_PUBLIC_KEY_HEX, withSignature)).toEqual(registerMessage(NODE_PUBLIC_KEY_HEX, body));
  });

  it('signs and verifies, and a changed body fails', () => {
    const signature = signHex(registerMessage(NODE_PUBLIC_KEY_HEX, body), nodeKey);
    expect(verifyHex(registerMessage(NODE_PUBLIC_KEY_HEX, body), signature, NODE_PUBLIC_KEY_HEX)).toBe(true);
    const changed = registerMessage(NODE_PUBLIC_KEY_HEX, { ...body, cpu_cores: 32 });
    expect(verifyHex(changed, signature, NODE_PUBLIC_KEY_HEX)).toBe(false);
  });

  it('rejects a non-canonical pubkey and a non-object body', () => {
    expect(() => registerMessage(NODE_PUBLIC_KEY_HEX.toUpperCase(), body)).toThrow(ProtocolError);
    expect(() => registerMessage(NODE_PUBLIC_KEY_HEX, [] as unknown as Record<string, unknown>)).toThrow(ProtocolError);
  });
});

describe('requestMessage', () => {
  const request = {
    method: 'post',
    pathWithQuery: '/api/v1/node/heartbeat?x=1',
    timestamp: 1_795_284_000_000,
    body: '{}',
  };

  it('is the domain line, METHOD, path, timestamp and body hash', () => {
    expect(requestMessage(request).toString('utf8')).toBe(
      `SVC-NODE-REQ-v1\nPOST\n/api/v1/node/heartbeat?x=1\n1795284000000\n${sha256Hex('{}')}`,
    );
  });

  it('treats a string body as UTF-8, a missing body as empty, a string timestamp as its number', () => {
    expect(requestMessage({ ...request, body: Buffer.from('{}') })).toEqual(requestMessage(request));
    expect(requestMessage({ ...request, timestamp: '1795284000000' })).toEqual(requestMessage(request));
    const get = requestMessage({ method: 'GET', pathWithQuery: '/w', timestamp: 0 }).toString('utf8');
    expect(get.endsWith(`\n0\n${sha256Hex('')}`)).toBe(true);
  });

  it.each<[Record<string, unknown>, string]>([
    [{ method: 'PO ST' }, '/method'],
    [{ method: '' }, '/method'],
    [{ pathWithQuery: 'api/v1' }, '/path'],
    [{ pathWithQuery: '/a\nb' }, '/path'],
    [{ pathWithQuery: '/a b' }, '/path'],
    [{ timestamp: -1 }, '/timestamp'],
    [{ timestamp: 1.5 }, '/timestamp'],
    [{ timestamp: '0123' }, '/timestamp'],
    [{ timestamp: '1e12' }, '/timestamp'],
    [{ body: 42 }, '/body'],
  ])('rejects %j at %s', (change, path) => {
    try {
      requestMessage({ ...request, ...change } as typeof request);
      expect.fail('did not throw');
    } catch (err) {
      expect(err).toBeInstanceOf(ProtocolError);
      expect((err as ProtocolError).path).toBe(path);
    }
  });
});
