import { UsageError } from './args.js';
import { ATTEST_USAGE, attest } from './attest.js';
import { CREDITS_USAGE, credits } from './credits.js';
import { NODE_USAGE, node } from './node.js';
import { PAYOUTS_USAGE, payouts } from './payouts.js';
import { KEYS_USAGE, keys } from './keys.js';
import { SERVE_USAGE, serve } from './serve.js';
import { VERIFY_USAGE, verify } from './verify.js';

const USAGE = `svc <command> [options]

Commands:
  serve     run the server (control plane + gateway)
  credits   add credits to an organization's balance
  payouts   pay operators their earnings (run), record a manual payment (mark-paid)
  node      run a provider node (registers, polls for work, signs receipts)
  verify    verify an evidence bundle offline (no server needed)
  attest    verify SEV-SNP or TDX attestation evidence offline
  keys      rotate the platform signing key
  help      show this text

${SERVE_USAGE}

${CREDITS_USAGE}

${PAYOUTS_USAGE}

${NODE_USAGE}

${VERIFY_USAGE}

${ATTEST_USAGE}

${KEYS_USAGE}
`;

type Command = (argv: string[]) => Promise<number>;

const COMMANDS: Record<string, Command> = {
  serve,
  credits,
  payouts,
  node,
  verify,
  attest,
  keys,
  help: async () => {
    process.stdout.write(USAGE);
    return 0;
  },
};

/** Entry point of the `svc` binary; returns the process exit code. */
export async function main(argv: string[]): Promise<number> {
  const [name = 'help', ...rest] = argv;
  const command = COMMANDS[name === '--help' || name === '-h' ? 'help' : name];
  if (!command) {
    process.stderr.write(`svc: unknown command '${name}'\n\n${USAGE}`);
    return 2;
  }
  try {
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
