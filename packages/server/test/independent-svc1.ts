import { createPublicKey, verify } from 'node:crypto';

/**
 * The SVC1 check an outside auditor would write, with node:crypto alone and none of our code:
 * tests use it so that a receipt is proven valid independently of `@svc/protocol`.
 */
export function svc1VerifiesIndependently(r: {
  job_id: string;
  node_public_key: string;
  result_hash: string;
  metering_units: number;
  signature: string;
}): boolean {
  const len = Buffer.alloc(2);
  len.writeUInt16BE(r.job_id.length);
  const units = Buffer.alloc(8);
  units.writeBigUInt64BE(BigInt(r.metering_units));
  const message = Buffer.concat([
    Buffer.from('SVC1\0', 'latin1'),
    len,
    Buffer.from(r.job_id, 'ascii'),
    Buffer.from(r.node_public_key, 'hex'),
    Buffer.from(r.result_hash, 'hex'),
    units,
  ]);
  const key = createPublicKey({
    key: Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), Buffer.from(r.node_public_key, 'hex')]),
    format: 'der',
    type: 'spki',
  });
  return verify(null, message, key, Buffer.from(r.signature, 'hex'));
}
