import { generateEd25519, publicKeyHex, registerMessage, signHex } from '@svc/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createKey, createTestApp, signUp, type TestApp } from '../../../test/harness.js';
import { countryFromSensors } from './sensors.js';

describe('countryFromSensors', () => {
  it('reads the country of the JSON, in either case; none without one', () => {
    expect(countryFromSensors('{"country":"CA","temp_c":41}')).toBe('CA');
    expect(countryFromSensors('{"country":"de"}')).toBe('DE');
    expect(countryFromSensors('{"temp_c":41}')).toBeUndefined();
    expect(countryFromSensors('[1,2]')).toBeUndefined();
    expect(countryFromSensors(undefined)).toBeUndefined();
  });

  it('refuses text that is not JSON and a country that is not two letters, naming /sensors', () => {
    expect(() => countryFromSensors('{not json')).toThrow(/sensors is not serialized JSON/);
    expect(() => countryFromSensors('{"country":"Canada"}')).toThrow(/ISO 3166-1 alpha-2/);
    expect(() => countryFromSensors('{"country":12}')).toThrow(/ISO 3166-1 alpha-2/);
  });
});

/** The spec's NodeRegisterRequest (issue 41 point 7): `sensors` names the location when `country` is absent. */
describe('node registration: the spec body', () => {
  let t: TestApp;
  let operatorKey: string;
  beforeAll(async () => {
    t = await createTestApp();
    operatorKey = await createKey(t.app, await signUp(t.app), ['operator']);
  });
  afterAll(() => t.close());

  const register = (fields: Record<string, unknown>, sign = true) => {
    const { privateKey } = generateEd25519();
    const pubkey = publicKeyHex(privateKey);
    const body = { pubkey, ...fields };
    return t.app.inject({
      method: 'POST',
      url: '/api/v1/node/register',
      headers: bearer(operatorKey),
      payload: sign ? { ...body, signature: signHex(registerMessage(pubkey, body), privateKey) } : fields,
    });
  };
  const countryOf = async (nodeId: string) => {
    const list = await t.app.inject({ method: 'GET', url: '/api/v1/nodes?limit=200', headers: bearer(operatorKey) });
    return (list.json().nodes as { node_id: string; country: string }[]).find((n) => n.node_id === nodeId)?.country;
  };

  it('takes the country from sensors when country is absent; a country of its own wins', async () => {
    const fromSensors = await register({ sensors: JSON.stringify({ country: 'ca', temp_c: 41 }) });
    expect(fromSensors.statusCode).toBe(200);
    expect(await countryOf(fromSensors.json().node_id)).toBe('CA');
    const own = await register({ country: 'FR', sensors: '{"country":"CA"}' });
    expect(own.statusCode).toBe(200);
    expect(await countryOf(own.json().node_id)).toBe('FR');
    const none = await register({ sensors: '{"temp_c":41}' });
    expect(none.statusCode).toBe(200);
    expect(await countryOf(none.json().node_id)).toBe('');
  });

  it('refuses malformed sensors JSON with a 400 naming /sensors, and registers nothing', async () => {
    const res = await register({ sensors: '{"country": "CA"' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({
      error: 'invalid_request',
      details: [{ path: '/sensors', message: 'must be a string holding serialized JSON' }],
    });
    const list = await t.app.inject({ method: 'GET', url: '/api/v1/nodes', headers: bearer(operatorKey) });
    expect(list.json().total).toBe(3);
  });

  it('keeps pubkey and signature required (identity and proof of the key): a clear 400 each', async () => {
    const noKey = await register({ sensors: '{}' }, false);
    expect(noKey.statusCode).toBe(400);
    expect(noKey.json().details).toEqual(
      expect.arrayContaining([
        { path: '/pubkey', message: "must have required property 'pubkey'" },
        { path: '/signature', message: "must have required property 'signature'" },
      ]),
    );
  });
});
