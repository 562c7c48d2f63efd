import { dispatch, type CommandTable } from './dispatch.js';
import { ATTEST_USAGE, NODE_USAGE, VERIFY_DOWNLOAD_USAGE, VERIFY_USAGE } from './usage.js';

const USAGE = `svc <command> [options]   (the node agent, as svc serve offers it for download)

Commands:
  node             run a provider node; node doctor checks the machine
  verify           verify an evidence bundle offline
  verify-download  check a downloaded svc tarball's SHA-256 and platform signature
  attest           verify SEV-SNP or TDX attestation evidence offline
  help             show this text (--version prints the version)

${NODE_USAGE}

${VERIFY_USAGE}

${VERIFY_DOWNLOAD_USAGE}

${ATTEST_USAGE}
`;

/** The commands of the packed agent: none of them loads the server. */
const AGENT_COMMANDS: CommandTable = {
  node: async () => (await import('./node-command.js')).nodeCommand,
  verify: async () => (await import('./verify.js')).verify,
  'verify-download': async () => (await import('./verify-download.js')).verifyDownload,
  attest: async () => (await import('./attest.js')).attest,
};

/**
 * Entry point of the `svc` the server packs as a tarball (scripts/pack-agent.mjs): the node agent
 * and the offline verifiers, without `serve` and the administrators' commands, so the tarball
 * depends on the agent's packages only.
 *
 * @example
 * process.exitCode = await agentMain(process.argv.slice(2));
 */
export function agentMain(argv: string[]): Promise<number> {
  return dispatch(argv, AGENT_COMMANDS, USAGE);
}
