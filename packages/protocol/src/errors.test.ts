import { describe, expect, it } from 'vitest';
import { ProtocolError } from './errors.js';

describe('ProtocolError', () => {
  it('is an Error with a name, a message and a JSON Pointer path', () => {
    const err = new ProtocolError('job_id is bad', '/job_id');
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe('ProtocolError');
    expect(err.message).toBe('job_id is bad');
    expect(err.path).toBe('/job_id');
  });

  it('leaves path undefined when not given', () => {
    expect(new ProtocolError('x').path).toBeUndefined();
  });
});
