import { dispatch, type CommandTable } from './dispatch.js';
import {
  ATTEST_USAGE,
  CREDITS_USAGE,
  KEYS_USAGE,
  LOG_USAGE,
  NODE_USAGE,
  PAYOUTS_USAGE,
  SERVE_USAGE,
  TOPUPS_USAGE,
  VERIFY_DOWNLOAD_USAGE,
  VERIFY_USAGE,
} from './usage.js';

const USAGE = `svc <command> [options]

Commands:
  serve     run the server (control plane + gateway)
  credits   add credits to an organization's balance
  payouts   pay operators their earnings (run), record a manual payment (mark-paid)
  topups    confirm a local top-up was paid: its promotional credit becomes paid credit (confirm)
  node      run a provider node (registers, polls for work, signs receipts); node doctor checks the machine
  verify    verify an evidence bundle offline (no server needed)
  log       watch a deployment's transparency log for forks and rollbacks (log watch)
  verify-download  check a downloaded svc tarball's SHA-256 and platform signature
  attest    verify SEV-SNP or TDX attestation evidence offline
  keys      rotate the platform signing key
  help      show this text (--version prints the version)

${SERVE_USAGE}

${CREDITS_USAGE}

${PAYOUTS_USAGE}

${TOPUPS_USAGE}

${NODE_USAGE}

${VERIFY_USAGE}

${LOG_USAGE}

${VERIFY_DOWNLOAD_USAGE}

${ATTEST_USAGE}

${KEYS_USAGE}
`;

/**
 * Each command's code, imported when it runs: `svc verify` or `svc node` then never loads the
 * server and its dependencies (about a second of CPU at every start).
 */
const COMMANDS: CommandTable = {
  serve: async () => (await import('./serve.js')).serve,
  credits: async () => (await import('./credits.js')).credits,
  payouts: async () => (await import('./payouts.js')).payouts,
  topups: async () => (await import('./topups.js')).topups,
  node: async () => (await import('./node-command.js')).nodeCommand,
  verify: async () => (await import('./verify.js')).verify,
  log: async () => (await import('./log-watch.js')).log,
  'verify-download': async () => (await import('./verify-download.js')).verifyDownload,
  attest: async () => (await import('./attest.js')).attest,
  keys: async () => (await import('./keys.js')).keys,
};

/** Entry point of the `svc` binary; returns the process exit code. */
export function main(argv: string[]): Promise<number> {
  return dispatch(argv, COMMANDS, USAGE);
}
