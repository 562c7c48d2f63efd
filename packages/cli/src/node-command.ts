import { compareVersions, SVC_VERSION } from './version.js';
import { agentDownloadUrl, fetchServerHealth } from './server-info.js';

/** The `--server` value in `svc node`'s arguments, if any (full validation is parseNodeFlags'). */
function serverFlag(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (arg === '--server') return argv[i + 1];
    if (arg.startsWith('--server=')) return arg.slice('--server='.length);
  }
  return undefined;
}

/**
 * The one line `svc node` prints when the server runs a newer svc than this agent, or undefined
 * when it does not (or says no version).
 *
 * @example
 * newerServerWarning('https://svc.example', '0.2.0', '0.1.0');
 * // 'svc node: warning: the server runs svc 0.2.0, newer than this agent (0.1.0): update with npm install -g https://svc.example/api/v1/downloads/svc-0.2.0.tgz'
 */
export function newerServerWarning(server: string, serverVersion: string | undefined, own: string): string | undefined {
  if (serverVersion === undefined || compareVersions(serverVersion, own) <= 0) return undefined;
  const url = agentDownloadUrl(server, serverVersion);
  return `svc node: warning: the server runs svc ${serverVersion}, newer than this agent (${own}): update with npm install -g ${url}`;
}

/** Asks the server's version once and warns on stderr when it is newer; a failed ask stays silent (registration reports it). */
async function warnWhenServerNewer(server: string, signal: AbortSignal): Promise<void> {
  const health = await fetchServerHealth(server, { signal }).catch(() => undefined);
  const warning = newerServerWarning(server, health?.version, SVC_VERSION);
  if (warning !== undefined) process.stderr.write(`${warning}\n`);
}

/**
 * `svc node`: `doctor` checks the machine, `--version` prints the version, anything else runs the
 * agent (packages/cli/src/node.ts) while the server's version is compared with ours.
 *
 * @example
 * process.exitCode = await nodeCommand(['doctor', '--server', 'https://svc.example']);
 */
export async function nodeCommand(argv: string[]): Promise<number> {
  if (argv[0] === 'doctor') return (await import('./doctor.js')).doctor(argv.slice(1));
  if (argv.includes('--version')) {
    process.stdout.write(`${SVC_VERSION}\n`);
    return 0;
  }
  const { node } = await import('./node.js');
  const server = serverFlag(argv);
  // The question ends with the agent: a bad flag exits at once, not when the ask times out.
  const asking = new AbortController();
  if (server !== undefined && URL.canParse(server)) void warnWhenServerNewer(server, asking.signal);
  try {
    return await node(argv);
  } finally {
    asking.abort();
  }
}
