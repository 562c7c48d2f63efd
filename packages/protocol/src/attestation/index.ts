// Attestation verifiers (`@svc/protocol/attestation`): Node.js only (node:crypto, @peculiar/x509),
// kept out of the main entry so the dashboard's bundle never pulls them in.
export * from './amd-roots.js';
export * from './checks.js';
export * from './sev-snp.js';
export * from './intel-roots.js';
export * from './tdx-quote.js';
export * from './tdx-tcb.js';
export * from './tdx.js';
