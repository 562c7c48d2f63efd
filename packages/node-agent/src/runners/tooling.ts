import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { toolingFromFiles, type DetectedTooling } from '@svc/protocol';

export { missingTooling } from '@svc/protocol';

async function text(dir: string, name: string): Promise<string | undefined> {
  try {
    if (!(await stat(join(dir, name))).isFile()) return undefined;
    return await readFile(join(dir, name), 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * What a checkout's top-level files say about its tooling (`toolingFromFiles` in the protocol,
 * which the server runs on the base commit too). Reads files only; runs nothing.
 *
 * @example
 * await detectTooling(repoDir); // { package_managers: ['npm'], test_commands: ['npm test', 'npm run lint'], files: ['package.json'] }
 */
export function detectTooling(dir: string): Promise<DetectedTooling> {
  return toolingFromFiles((name) => text(dir, name));
}
