import type { DestinationStream } from 'pino';
import pretty from 'pino-pretty';

/** How `svc serve` writes its logs: readable lines for a person at a terminal, JSON for everything else. */
export type LogFormat = 'pretty' | 'json';

/**
 * Pretty when stdout is a terminal; JSON when it is a pipe or a file (a log collector, systemd,
 * a container runtime), which is what those read.
 *
 * @example
 * logFormat(process.stdout); // 'pretty' at a terminal
 */
export function logFormat(stdout: { isTTY?: boolean }): LogFormat {
  return stdout.isTTY === true ? 'pretty' : 'json';
}

/** The log destination for `format`: undefined keeps pino's JSON on stdout; pretty lines go to `out`. */
export function logStream(
  format: LogFormat,
  out: NodeJS.WritableStream = process.stdout,
): DestinationStream | undefined {
  if (format === 'json') return undefined;
  return pretty({
    colorize: out === process.stdout,
    destination: out,
    translateTime: 'SYS:HH:MM:ss',
    ignore: 'pid,hostname',
  });
}

/**
 * What `svc serve` prints first: where it listens, where the dashboard is, and the command that
 * starts a node against it.
 *
 * @example
 * startupLines({ url: 'http://127.0.0.1:8080', store: 'pglite' })[2];
 * // '  start a node: npx svc node --server http://127.0.0.1:8080 --api-key <operator key>'
 */
export function startupLines(options: { url: string; publicUrl?: string; store: string }): string[] {
  const base = options.publicUrl ?? options.url;
  return [
    `svc serve: listening on ${options.url} (store: ${options.store})`,
    `  dashboard:    ${base}/`,
    `  start a node: npx svc node --server ${base} --api-key <operator key>`,
    `                (an API key with the operator scope: dashboard > Keys, or POST /api/v1/auth/api-keys)`,
  ];
}
