import { UsageError } from './args.js';
import {
  ATTEST_USAGE,
  CREDITS_USAGE,
  KEYS_USAGE,
  LOG_USAGE,
  NODE_USAGE,
  PAYOUTS_USAGE,
  SERVE_USAGE,
  TOPUPS_USAGE,
  VERIFY_USAGE,
} from './usage.js';

const USAGE = `svc <command> [options]

Commands:
  serve     run the server (control plane + gateway)
  credits   add credits to an organization's balance
  payouts   pay operators their earnings (run), record a manual payment (mark-paid)
  topups    confirm a local top-up was paid: its promotional credit becomes paid credit (confirm)
  node      run a provider node (registers, polls for work, signs receipts)
  verify    verify an evidence bundle offline (no server needed)
  log       watch a deployment's transparency log for forks and rollbacks (log watch)
  attest    verify SEV-SNP or TDX attestation evidence offline
  keys      rotate the platform signing key
  help      show this text

${SERVE_USAGE}

${CREDITS_USAGE}

${PAYOUTS_USAGE}

${TOPUPS_USAGE}

${NODE_USAGE}

${VERIFY_USAGE}

${LOG_USAGE}

${ATTEST_USAGE}

${KEYS_USAGE}
`;

type Command = (argv: string[]) => Promise<number>;

/**
 * Each command's code, imported when it runs: `svc verify` or `svc node` then never loads the
 * server and its dependencies (about a second of CPU at every start).
 */
const COMMANDS: Record<string, () => Promise<Command>> = {
  serve: async () => (await import('./serve.js')).serve,
  credits: async () => (await import('./credits.js')).credits,
  payouts: async () => (await import('./payouts.js')).payouts,
  topups: async () => (await import('./topups.js')).topups,
  node: async () => (await import('./node.js')).node,
  verify: async () => (await import('./verify.js')).verify,
  log: async () => (await import('./log-watch.js')).log,
  attest: async () => (await import('./attest.js')).attest,
  keys: async () => (await import('./keys.js')).keys,
  help: async () => async () => {
    process.stdout.write(USAGE);
    return 0;
  },
};

/** Entry point of the `svc` binary; returns the process exit code. */
export async function main(argv: string[]): Promise<number> {
  const [name = 'help', ...rest] = argv;
  const load = COMMANDS[name === '--help' || name === '-h' ? 'help' : name];
  if (!load) {
    process.stderr.write(`svc: unknown command '${name}'\n\n${USAGE}`);
    return 2;
  }
  try {
    const command = await load();
    return await command(rest);
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`svc ${name}: ${err.message}\n`);
      return 2;
    }
    process.stderr.write(`svc ${name}: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}
