#!/usr/bin/env node
// Packs the node agent as an npm-installable tarball: `svc` (node, node doctor, verify,
// verify-download, attest; packages/cli/src/agent-main.ts) compiled with esbuild into one file,
// with a generated package.json whose dependencies are the npm packages the bundle leaves as
// imports, at the versions package-lock.json holds. node-llama-cpp is an optional peer: the agent
// loads it lazily for --gguf, and `npm install -g` does not fetch it.
//
//   node scripts/pack-agent.mjs [--out DIR] [--force] [--soft]
//
// Writes DIR/svc-<version>.tgz and DIR/svc-<version>.json (the manifest: sha256, size, and the
// digest of the inputs it was built from). DIR defaults to node_modules/.cache/svc-agent (never
// checked in). Nothing is rebuilt when the manifest's input digest matches the sources. --soft
// (the root `prepare`) reports a failure and exits 0: an install never fails for the tarball.
// `svc serve` runs this at start and lists the result at GET /api/v1/downloads.
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const DEFAULT_OUT = join(ROOT, 'node_modules', '.cache', 'svc-agent');
const SOURCE_DIRS = ['packages/cli/src', 'packages/node-agent/src', 'packages/protocol/src'];
const INPUT_FILES = [
  'package.json',
  'package-lock.json',
  'packages/cli/package.json',
  'packages/node-agent/package.json',
  'packages/protocol/package.json',
  'scripts/pack-agent.mjs',
];
const BUILTINS = new Set(builtinModules);

async function filesUnder(dir) {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries
    .filter((e) => e.isFile() && /\.(ts|mts|js|mjs|json)$/.test(e.name) && !/\.test\.ts$/.test(e.name))
    .map((e) => join(e.parentPath ?? e.path, e.name));
}

/** SHA-256 over every input's path and bytes, in a fixed order: equal digests, equal tarballs. */
export async function inputsDigest(root = ROOT) {
  const files = [
    ...INPUT_FILES.map((f) => join(root, f)),
    ...(await Promise.all(SOURCE_DIRS.map((d) => filesUnder(join(root, d))))).flat(),
  ].sort();
  const hash = createHash('sha256');
  for (const file of files) {
    hash.update(`${relative(root, file)}\0`);
    hash.update(await readFile(file));
    hash.update('\0');
  }
  return hash.digest('hex');
}

/** The npm package an import specifier names (`@scope/name/sub` -> `@scope/name`). */
function packageOf(specifier) {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] ?? specifier);
}

function run(program, args, cwd) {
  return new Promise((resolveRun, reject) => {
    execFile(program, args, { cwd, encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) =>
      err
        ? reject(new Error(`${program} ${args.join(' ')} failed: ${stderr.trim() || err.message}`))
        : resolveRun(stdout),
    );
  });
}

/** Compiles the agent into `<dir>/dist/svc.mjs` and answers the packages it imports. */
async function bundle(dir, version) {
  const { build } = await import('esbuild').catch((err) => {
    throw new Error(`esbuild is not installed (a devDependency: run npm install without --omit=dev): ${err.message}`);
  });
  const result = await build({
    stdin: {
      contents: `import { agentMain } from './packages/cli/src/agent-main.ts';\nprocess.exitCode = await agentMain(process.argv.slice(2));\n`,
      resolveDir: ROOT,
      sourcefile: 'svc-agent-entry.ts',
      loader: 'ts',
    },
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    outfile: join(dir, 'dist', 'svc.mjs'),
    banner: { js: '#!/usr/bin/env node' },
    define: { SVC_PACKED_VERSION: JSON.stringify(version) },
    metafile: true,
    logLevel: 'error',
    plugins: [
      {
        name: 'svc-npm-packages-external',
        setup(b) {
          b.onResolve({ filter: /^[^./]/ }, (args) => (args.path.startsWith('@svc/') ? undefined : { external: true }));
        },
      },
    ],
  });
  const imported = new Set();
  for (const output of Object.values(result.metafile.outputs))
    for (const imp of output.imports)
      if (imp.external && !imp.path.startsWith('node:') && !BUILTINS.has(imp.path)) imported.add(packageOf(imp.path));
  return [...imported].sort();
}

/** Builds the tarball into `out` unless it is up to date; answers its manifest. */
export async function packAgent({ out = DEFAULT_OUT, force = false } = {}) {
  const rootPackage = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8'));
  const version = rootPackage.version;
  const file = `svc-${version}.tgz`;
  const manifestPath = join(out, `svc-${version}.json`);
  const digest = await inputsDigest();
  if (!force && existsSync(join(out, file)) && existsSync(manifestPath)) {
    const manifest = JSON.parse(await readFile(manifestPath, 'utf8'));
    if (manifest.inputs_digest === digest) return { ...manifest, rebuilt: false };
  }
  await mkdir(out, { recursive: true });
  // Each build in a directory of its own, renamed into place: concurrent builds never mix files.
  const work = join(out, `build-${process.pid}-${randomBytes(4).toString('hex')}`);
  const pkgDir = join(work, 'svc');
  try {
    const externals = await bundle(pkgDir, version);
    const lock = JSON.parse(await readFile(join(ROOT, 'package-lock.json'), 'utf8'));
    const dependencies = {};
    for (const name of externals) {
      const locked = lock.packages?.[`node_modules/${name}`]?.version;
      if (locked === undefined) throw new Error(`the agent imports ${name}, which package-lock.json does not hold`);
      dependencies[name] = locked;
    }
    const agentPackage = JSON.parse(await readFile(join(ROOT, 'packages/node-agent/package.json'), 'utf8'));
    const llama = agentPackage.optionalDependencies?.['node-llama-cpp'];
    await writeFile(
      join(pkgDir, 'package.json'),
      `${JSON.stringify(
        {
          name: 'svc',
          version,
          description: 'SVC node agent: svc node, svc node doctor, svc verify, svc verify-download, svc attest',
          type: 'module',
          license: rootPackage.license,
          engines: rootPackage.engines,
          bin: { svc: 'dist/svc.mjs' },
          files: ['dist', 'README.md'],
          dependencies,
          ...(llama
            ? {
                peerDependencies: { 'node-llama-cpp': llama },
                peerDependenciesMeta: { 'node-llama-cpp': { optional: true } },
              }
            : {}),
        },
        null,
        2,
      )}\n`,
    );
    await writeFile(
      join(pkgDir, 'README.md'),
      `# svc ${version}: the SVC node agent\n\nInstalled from your SVC server (GET /api/v1/downloads lists the URL, its SHA-256 and\nsignature). Run \`svc node doctor --server URL\`, then \`svc node --server URL --api-key KEY ...\`.\nFor --gguf models, also \`npm install -g node-llama-cpp\`. See docs/node-operator.md.\n`,
    );
    const packed = JSON.parse(await run('npm', ['pack', '--json', '--pack-destination', work], pkgDir));
    const tgz = join(work, packed[0].filename);
    const bytes = await readFile(tgz);
    const manifest = {
      name: 'svc',
      version,
      file,
      size: bytes.length,
      sha256: createHash('sha256').update(bytes).digest('hex'),
      inputs_digest: digest,
      dependencies,
      built_at: new Date().toISOString(),
    };
    await rename(tgz, join(out, file));
    await writeFile(join(work, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
    await rename(join(work, 'manifest.json'), manifestPath);
    return { ...manifest, rebuilt: true };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const argv = process.argv.slice(2);
  const outAt = argv.indexOf('--out');
  const out = outAt === -1 ? DEFAULT_OUT : resolve(argv[outAt + 1] ?? '');
  try {
    const manifest = await packAgent({ out, force: argv.includes('--force') });
    process.stdout.write(
      `svc agent tarball ${manifest.rebuilt ? 'built' : 'up to date'}: ${join(out, manifest.file)} (${manifest.size} bytes, sha256 ${manifest.sha256})\n`,
    );
  } catch (err) {
    process.stderr.write(`pack-agent: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = argv.includes('--soft') ? 0 : 1;
  }
}
