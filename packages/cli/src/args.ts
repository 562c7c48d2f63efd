/** Parsed command-line arguments: `--name value`, `--name=value`, `--flag`, and positionals. */
export interface ParsedArgs {
  positionals: string[];
  flags: Record<string, string | boolean>;
  /** Flags given more than once (`--model a --model b`). */
  multi: Record<string, string[]>;
}

export class UsageError extends Error {
  override name = 'UsageError';
}

/**
 * Parses argv against the flags a command knows; unknown flags are a UsageError.
 *
 * @example
 * parseArgs(['--port', '9000', '--json'], { values: ['port'], booleans: ['json'] });
 */
export function parseArgs(argv: string[], spec: { values: string[]; booleans: string[] }): ParsedArgs {
  const result: ParsedArgs = { positionals: [], flags: {}, multi: {} };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (!arg.startsWith('--')) {
      result.positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
    if (spec.booleans.includes(name)) {
      if (eq !== -1) throw new UsageError(`--${name} takes no value`);
      result.flags[name] = true;
      continue;
    }
    if (!spec.values.includes(name)) throw new UsageError(`unknown option --${name}`);
    const value = eq === -1 ? argv[++i] : arg.slice(eq + 1);
    if (value === undefined || (eq === -1 && value.startsWith('--'))) throw new UsageError(`--${name} needs a value`);
    result.flags[name] = value;
    (result.multi[name] ??= []).push(value);
  }
  return result;
}
