import { ApiError } from '../../platform/errors.js';

/**
 * The country a registration's `sensors` names, for a node that sends no `country` of its own
 * (the spec's NodeRegisterRequest has `sensors`, "a string holding serialized JSON", and no
 * country field). `sensors` must be JSON whenever it is sent; its location is the object's
 * `country`, an ISO 3166-1 alpha-2 code in either case (`{"country": "ca"}` is `CA`). JSON without
 * a `country` names no location. Refused with 400 naming `/sensors`: text that is not JSON, and a
 * `country` that is not two letters. The signature covers `sensors` as sent, so nothing is rewritten.
 *
 * @example
 * countryFromSensors('{"country":"CA","temp_c":41}') // 'CA'
 * countryFromSensors('{"temp_c":41}') // undefined
 * countryFromSensors('{not json') // throws ApiError invalid_request, path /sensors
 */
export function countryFromSensors(sensors: string | undefined): string | undefined {
  if (sensors === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(sensors);
  } catch (err) {
    throw new ApiError('invalid_request', `sensors is not serialized JSON: ${(err as Error).message}`, [
      { path: '/sensors', message: 'must be a string holding serialized JSON' },
    ]);
  }
  if (typeof parsed !== 'object' || parsed === null || !('country' in parsed)) return undefined;
  const country = (parsed as { country: unknown }).country;
  if (typeof country !== 'string' || !/^[A-Za-z]{2}$/.test(country))
    throw new ApiError('invalid_request', 'sensors.country must be an ISO 3166-1 alpha-2 code such as "CA"', [
      { path: '/sensors', message: 'country must be two letters (ISO 3166-1 alpha-2)' },
    ]);
  return country.toUpperCase();
}
