import { KeyObject, sign, webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import type { PinnedRoot } from './amd-roots.js';
import { fingerprint } from './checks.js';
import { SNP_REPORT_SIZE } from './sev-snp.js';

/**
 * TESTS ONLY: a throwaway ARK/ASK/VCEK chain shaped like AMD's (RSA-PSS SHA-384 CA certificates,
 * an ECDSA P-384 VCEK with the TCB and hwID extensions) and a signer of synthetic SNP reports.
 * Its ARK is trusted only where a test passes `pin` as an extra root; no default build does.
 */
export interface SnpTestChain {
  /** ASK then ARK, PEM. */
  chainPem: string;
  vcekDer: Buffer;
  pin: PinnedRoot;
  chipId: Buffer;
  /** A version 2 report with these fields, signed by the VCEK. */
  signReport(fields: {
    reportData: Buffer;
    measurement?: Buffer;
    policy?: bigint;
    tcb?: { bootloader: number; tee: number; snp: number; microcode: number };
  }): Buffer;
}

type KeyPair = webcrypto.CryptoKeyPair;
const subtle = webcrypto.subtle;
const cryptoImpl = webcrypto as unknown as Parameters<typeof x509.X509CertificateGenerator.create>[1];
const PSS = { name: 'RSA-PSS', hash: 'SHA-384', saltLength: 48 };
const TCB = { bootloader: 3, tee: 0, snp: 8, microcode: 115 };

function derUint(n: number): ArrayBuffer {
  const bytes = n >= 0x80 ? [0x02, 0x02, 0x00, n] : [0x02, 0x01, n];
  return new Uint8Array(bytes).buffer;
}

async function ca(
  name: string,
  keys: KeyPair,
  issuer: { name: string; keys: KeyPair },
  serial: string,
): Promise<x509.X509Certificate> {
  return x509.X509CertificateGenerator.create(
    {
      serialNumber: serial,
      subject: `CN=${name}, O=SVC test AMD`,
      issuer: `CN=${issuer.name}, O=SVC test AMD`,
      notBefore: new Date('2024-01-01T00:00:00Z'),
      notAfter: new Date('2045-01-01T00:00:00Z'),
      signingAlgorithm: PSS,
      publicKey: keys.publicKey,
      signingKey: issuer.keys.privateKey,
      extensions: [new x509.BasicConstraintsExtension(true, undefined, true)],
    },
    cryptoImpl,
  );
}

export async function createSnpTestChain(product = 'Test'): Promise<SnpTestChain> {
  const rsa = { ...PSS, modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]) };
  const arkKeys = (await subtle.generateKey(rsa, true, ['sign', 'verify'])) as KeyPair;
  const askKeys = (await subtle.generateKey(rsa, true, ['sign', 'verify'])) as KeyPair;
  const vcekKeys = (await subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-384' }, true, [
    'sign',
    'verify',
  ])) as KeyPair;
  const ark = await ca(`ARK-${product}`, arkKeys, { name: `ARK-${product}`, keys: arkKeys }, '01');
  const ask = await ca(`SEV-${product}`, askKeys, { name: `ARK-${product}`, keys: arkKeys }, '02');
  const chipId = Buffer.alloc(64, 0x5a);
  const vcek = await x509.X509CertificateGenerator.create(
    {
      serialNumber: '03',
      subject: 'CN=SEV-VCEK, O=SVC test AMD',
      issuer: `CN=SEV-${product}, O=SVC test AMD`,
      notBefore: new Date('2024-01-01T00:00:00Z'),
      notAfter: new Date('2045-01-01T00:00:00Z'),
      signingAlgorithm: PSS,
      publicKey: vcekKeys.publicKey,
      signingKey: askKeys.privateKey,
      extensions: [
        new x509.Extension('1.3.6.1.4.1.3704.1.3.1', false, derUint(TCB.bootloader)),
        new x509.Extension('1.3.6.1.4.1.3704.1.3.2', false, derUint(TCB.tee)),
        new x509.Extension('1.3.6.1.4.1.3704.1.3.3', false, derUint(TCB.snp)),
        new x509.Extension('1.3.6.1.4.1.3704.1.3.8', false, derUint(TCB.microcode)),
        new x509.Extension('1.3.6.1.4.1.3704.1.4', false, new Uint8Array(chipId).buffer),
      ],
    },
    cryptoImpl,
  );
  const signingKey = KeyObject.from(vcekKeys.privateKey);
  const chainPem = `${ask.toString('pem')}\n${ark.toString('pem')}\n`;
  return {
    chainPem,
    vcekDer: Buffer.from(vcek.rawData),
    pin: { product, fingerprint: fingerprint(ark), chain: chainPem },
    chipId,
    signReport({ reportData, measurement = Buffer.alloc(48, 0x11), policy = 0x30000n, tcb = TCB }) {
      const b = Buffer.alloc(SNP_REPORT_SIZE);
      b.writeUInt32LE(2, 0x00);
      b.writeBigUInt64LE(policy, 0x08);
      b.writeUInt32LE(1, 0x34);
      const tcbBytes = Buffer.from([tcb.bootloader, tcb.tee, 0, 0, 0, 0, tcb.snp, tcb.microcode]);
      for (const off of [0x38, 0x180, 0x1e0, 0x1f0]) tcbBytes.copy(b, off);
      reportData.copy(b, 0x50);
      measurement.copy(b, 0x90);
      chipId.copy(b, 0x1a0);
      const sig = sign('sha384', b.subarray(0, 0x2a0), { key: signingKey, dsaEncoding: 'ieee-p1363' });
      Buffer.from(sig.subarray(0, 48)).reverse().copy(b, 0x2a0);
      Buffer.from(sig.subarray(48))
        .reverse()
        .copy(b, 0x2a0 + 72);
      return b;
    },
  };
}
