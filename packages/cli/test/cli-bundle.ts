import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build, type Plugin } from 'esbuild';

const CLI_SRC = fileURLToPath(new URL('../src/main.ts', import.meta.url));

/**
 * The repository's own sources, compiled as they are (esbuild, as tsx does) into one file, each
 * module keeping its place: `import.meta.url` becomes the URL of the source file it is written
 * in, so paths built from it (migrations, the dashboard, the parse worker) resolve as under tsx.
 * Packages from node_modules stay imports, loaded by Node from where they are installed.
 */
const keepPlaces: Plugin = {
  name: 'svc-keep-places',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) => (args.path.startsWith('@svc/') ? undefined : { external: true }));
    b.onLoad({ filter: /\.(ts|tsx|mts|js|mjs)$/ }, (args) => {
      if (args.path.includes('/node_modules/')) return undefined;
      const url = pathToFileURL(args.path).href;
      const contents = readFileSync(args.path, 'utf8')
        .replaceAll('import.meta.url', JSON.stringify(url))
        .replaceAll('import.meta.filename', JSON.stringify(args.path))
        .replaceAll('import.meta.dirname', JSON.stringify(dirname(args.path)));
      const loader = /\.(ts|mts)$/.test(args.path) ? 'ts' : args.path.endsWith('.tsx') ? 'tsx' : 'js';
      return { contents, loader };
    });
  },
};

/**
 * Builds `svc` (packages/cli/src/main.ts and everything of ours it imports) into `<outDir>/svc.mjs`
 * and the chunks its commands load (`<outDir>/chunks/`), and returns the entry's path. A spawned `svc` started through bin/svc.js spends about 1 s of CPU in
 * tsx's loader before it does anything (it resolves and loads every module through a loader
 * thread); from this file it does not. The code is the same, compiled by the same esbuild.
 * The directory must be inside the repository's node_modules, so the packages resolve.
 *
 * @example
 * const bin = await buildCliBundle(join(root, 'node_modules/.cache/svc-cli'));
 * spawn(process.execPath, [bin, 'serve']);
 */
export async function buildCliBundle(outDir: string): Promise<string> {
  // Split at the dynamic imports, as under tsx: each command's code (and the packages it imports)
  // loads only when that command runs.
  const entry = join(outDir, 'svc.ts');
  writeFileSync(
    entry,
    `import { main } from ${JSON.stringify(CLI_SRC)};\nprocess.exitCode = await main(process.argv.slice(2));\n`,
  );
  await build({
    entryPoints: [entry],
    bundle: true,
    splitting: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    outdir: outDir,
    outExtension: { '.js': '.mjs' },
    chunkNames: 'chunks/[name]-[hash]',
    logLevel: 'error',
    plugins: [keepPlaces],
  });
  return join(outDir, 'svc.mjs');
}
