/**
 * The manifest of a capture set (DESIGN.md section 14): `{version, files: [{path, bytes, sha256,
 * content_type}]}`. Paths are relative, `/`-separated and normalised, unique (also ignoring case,
 * since the files may land on a case-insensitive disk), never `..`, absolute, a Windows device
 * name or holding control characters. Pure: shared by the server, the node agent and the dashboard.
 */
export interface CaptureManifestFile {
  path: string;
  bytes: number;
  /** Lowercase hex SHA-256 of the file's bytes. */
  sha256: string;
  content_type: string;
}

export interface CaptureManifest {
  version: string;
  files: CaptureManifestFile[];
}

/** One reason a manifest is refused, at a JSON pointer into the manifest. */
export interface ManifestProblem {
  path: string;
  message: string;
}

export const MAX_MANIFEST_FILES = 10_000;
export const MAX_MANIFEST_PATH_LENGTH = 1024;
const DEFAULT_CONTENT_TYPE = 'application/octet-stream';

// CON, PRN, AUX, NUL, COM0-9, LPT0-9 (also with superscript digits), with or without an extension.
const DEVICE_NAME = /^(con|prn|aux|nul|conin\$|conout\$|com[0-9¹²³]|lpt[0-9¹²³])(\..*)?$/i;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const FORBIDDEN_CHARS = /[\\:*?"<>|]/;

/**
 * Why `path` is not a valid manifest path, or undefined when it is.
 *
 * @example
 * manifestPathProblem('scans/../etc/passwd') // 'must not contain a ".." segment'
 */
export function manifestPathProblem(path: string): string | undefined {
  if (path.length === 0) return 'must not be empty';
  if (path.length > MAX_MANIFEST_PATH_LENGTH) return `must be at most ${MAX_MANIFEST_PATH_LENGTH} characters`;
  if (CONTROL.test(path)) return 'must not contain control characters';
  if (path.startsWith('/')) return 'must be relative (no leading "/")';
  if (/^[A-Za-z]:(\/|\\|$)/.test(path)) return 'must be relative (no drive letter)';
  if (path.includes('\\')) return 'must use "/" as the separator, not "\\"';
  if (path.normalize('NFC') !== path) return 'must be in Unicode normalisation form C';
  for (const segment of path.split('/')) {
    if (segment === '') return 'must be normalised (no empty segment, no trailing "/")';
    if (segment === '..') return 'must not contain a ".." segment';
    if (segment === '.') return 'must be normalised (no "." segment)';
    const ch = FORBIDDEN_CHARS.exec(segment);
    if (ch) return `must not contain the character ${JSON.stringify(ch[0])}`;
    if (/[. ]$/.test(segment)) return `segment "${segment}" must not end with "." or a space`;
    if (DEVICE_NAME.test(segment)) return `segment "${segment}" is a reserved device name`;
  }
  return undefined;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Checks a manifest as a client sent it and returns it normalised (hashes lower-cased, content
 * types defaulted), or every problem found, each at a JSON pointer under `at`.
 *
 * @example
 * parseCaptureManifest({ version: '1', files: [{ path: 'a.jpg', bytes: 3, sha256: '...' }] })
 */
export function parseCaptureManifest(
  input: unknown,
  at = '',
): { manifest: CaptureManifest } | { problems: ManifestProblem[] } {
  const problems: ManifestProblem[] = [];
  if (!isObject(input)) return { problems: [{ path: at || '/', message: 'must be an object {version, files}' }] };
  for (const key of Object.keys(input))
    if (key !== 'version' && key !== 'files')
      problems.push({ path: `${at}/${key}`, message: 'is not a manifest field (version, files)' });
  let version = '1';
  if (input.version !== undefined) {
    if (typeof input.version === 'string' && input.version.length >= 1 && input.version.length <= 64)
      version = input.version;
    else if (typeof input.version === 'number' && Number.isInteger(input.version) && input.version >= 0)
      version = String(input.version);
    else problems.push({ path: `${at}/version`, message: 'must be a string of 1 to 64 characters' });
  }
  if (!Array.isArray(input.files))
    return {
      problems: [
        ...problems,
        { path: `${at}/files`, message: 'must be an array of {path, bytes, sha256, content_type}' },
      ],
    };
  if (input.files.length > MAX_MANIFEST_FILES)
    return {
      problems: [...problems, { path: `${at}/files`, message: `must list at most ${MAX_MANIFEST_FILES} files` }],
    };
  const rawFiles: unknown[] = input.files;
  const files: CaptureManifestFile[] = [];
  const seen = new Map<string, number>();
  let total = 0;
  rawFiles.forEach((raw, i) => {
    const here = `${at}/files/${i}`;
    if (!isObject(raw))
      return problems.push({ path: here, message: 'must be an object {path, bytes, sha256, content_type}' });
    for (const key of Object.keys(raw))
      if (!['path', 'bytes', 'sha256', 'content_type'].includes(key))
        problems.push({ path: `${here}/${key}`, message: 'is not a file field (path, bytes, sha256, content_type)' });
    const { path, bytes, sha256, content_type } = raw;
    let ok = true;
    if (typeof path !== 'string') {
      problems.push({ path: `${here}/path`, message: 'must be a string' });
      ok = false;
    } else {
      const why = manifestPathProblem(path);
      if (why) {
        problems.push({ path: `${here}/path`, message: `${JSON.stringify(path.slice(0, 200))} ${why}` });
        ok = false;
      }
    }
    if (typeof bytes !== 'number' || !Number.isSafeInteger(bytes) || bytes < 0) {
      problems.push({ path: `${here}/bytes`, message: 'must be an integer from 0 to 2^53-1' });
      ok = false;
    }
    if (typeof sha256 !== 'string' || !/^[0-9a-fA-F]{64}$/.test(sha256)) {
      problems.push({ path: `${here}/sha256`, message: 'must be 64 hex characters (the SHA-256 of the file)' });
      ok = false;
    }
    if (
      content_type !== undefined &&
      (typeof content_type !== 'string' || !/^[\w.+-]+\/[\w.+-]+$/.test(content_type) || content_type.length > 255)
    ) {
      problems.push({ path: `${here}/content_type`, message: 'must be a media type such as image/jpeg' });
      ok = false;
    }
    if (!ok || typeof path !== 'string' || typeof bytes !== 'number' || typeof sha256 !== 'string') return;
    const folded = path.toLowerCase();
    const earlier = seen.get(folded);
    if (earlier !== undefined)
      return problems.push({
        path: `${here}/path`,
        message: `${JSON.stringify(path)} repeats files/${earlier} (paths must be unique, ignoring case)`,
      });
    seen.set(folded, i);
    total += bytes;
    files.push({
      path,
      bytes,
      sha256: sha256.toLowerCase(),
      content_type: typeof content_type === 'string' ? content_type : DEFAULT_CONTENT_TYPE,
    });
  });
  // A path that is also another path's folder could not be written out as files.
  const all = new Set(files.map((f) => f.path.toLowerCase()));
  files.forEach((f) => {
    const parts = f.path.toLowerCase().split('/');
    for (let n = 1; n < parts.length; n += 1) {
      const folder = parts.slice(0, n).join('/');
      if (all.has(folder))
        problems.push({
          path: `${at}/files/${rawFiles.findIndex((r) => isObject(r) && r.path === f.path)}/path`,
          message: `${JSON.stringify(f.path)} lies inside "${folder}", which is also a file`,
        });
    }
  });
  if (!Number.isSafeInteger(total))
    problems.push({ path: `${at}/files`, message: 'the files add up to more than 2^53-1 bytes' });
  return problems.length > 0 ? { problems } : { manifest: { version, files } };
}

/** Total bytes of a manifest's files. */
export function manifestBytes(manifest: CaptureManifest): number {
  return manifest.files.reduce((sum, f) => sum + f.bytes, 0);
}
