import { UsageError } from './args.js';
import { SVC_VERSION } from './version.js';

/** A command's code: takes its arguments, answers the exit code. */
export type Command = (argv: string[]) => Promise<number>;

/** Each command's code, imported when it runs (so `svc node` never loads the server). */
export type CommandTable = Record<string, () => Promise<Command>>;

/**
 * Runs the command `argv[0]` names from `commands`: `help` (also `--help`, `-h`, nothing) prints
 * `usage`, `--version` the version; an unknown name exits 2, a {@link UsageError} 2, any other
 * error 1, each with one line on stderr.
 *
 * @example
 * process.exitCode = await dispatch(process.argv.slice(2), { node: async () => node }, USAGE);
 */
export async function dispatch(argv: string[], commands: CommandTable, usage: string): Promise<number> {
  const [name = 'help', ...rest] = argv;
  if (name === '--version') {
    process.stdout.write(`${SVC_VERSION}\n`);
    return 0;
  }
  if (name === 'help' || name === '--help' || name === '-h') {
    process.stdout.write(usage);
    return 0;
  }
  const load = commands[name];
  if (!load) {
    process.stderr.write(`svc: unknown command '${name}'\n\n${usage}`);
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
