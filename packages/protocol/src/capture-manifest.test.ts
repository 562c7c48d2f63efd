import { describe, expect, it } from 'vitest';
import { manifestBytes, manifestPathProblem, parseCaptureManifest } from './capture-manifest.js';

const H = 'a'.repeat(64);

describe('capture manifest paths', () => {
  it.each([
    ['scans/2026-11-24/IMG_0001.JPG', undefined],
    ['point clouds/site a.laz', undefined],
    ['données/été.jpg', undefined],
    ['', 'must not be empty'],
    ['/etc/passwd', 'must be relative (no leading "/")'],
    ['C:/Windows/x', 'must be relative (no drive letter)'],
    ['scans\\a.jpg', 'must use "/" as the separator, not "\\"'],
    ['scans/../etc/passwd', 'must not contain a ".." segment'],
    ['..', 'must not contain a ".." segment'],
    ['./a.jpg', 'must be normalised (no "." segment)'],
    ['a//b.jpg', 'must be normalised (no empty segment, no trailing "/")'],
    ['scans/', 'must be normalised (no empty segment, no trailing "/")'],
    ['scans/CON', 'segment "CON" is a reserved device name'],
    ['nul.txt', 'segment "nul.txt" is a reserved device name'],
    ['Com1/a.jpg', 'segment "Com1" is a reserved device name'],
    ['lpt9.log', 'segment "lpt9.log" is a reserved device name'],
    ['a\u0000b', 'must not contain control characters'],
    ['a\nb', 'must not contain control characters'],
    ['a\u007fb', 'must not contain control characters'],
    ['a:stream', 'must not contain the character ":"'],
    ['a?.jpg', 'must not contain the character "?"'],
    ['trailing./a', 'segment "trailing." must not end with "." or a space'],
    ['e\u0301te.jpg', 'must be in Unicode normalisation form C'],
    ['x'.repeat(1025), 'must be at most 1024 characters'],
  ])('%j: %s', (path, problem) => {
    expect(manifestPathProblem(path)).toBe(problem);
  });

  it('keeps names that only start like a device name', () => {
    expect(manifestPathProblem('console.log')).toBeUndefined();
    expect(manifestPathProblem('nullable/aux1.txt')).toBeUndefined();
  });
});

describe('capture manifest', () => {
  it('normalises a valid manifest: version as a string, hashes lower-cased, a default content type', () => {
    const out = parseCaptureManifest({
      version: 2,
      files: [
        { path: 'a.jpg', bytes: 3, sha256: 'AB'.repeat(32), content_type: 'image/jpeg' },
        { path: 'b/c.bin', bytes: 0, sha256: H },
      ],
    });
    expect(out).toEqual({
      manifest: {
        version: '2',
        files: [
          { path: 'a.jpg', bytes: 3, sha256: 'ab'.repeat(32), content_type: 'image/jpeg' },
          { path: 'b/c.bin', bytes: 0, sha256: H, content_type: 'application/octet-stream' },
        ],
      },
    });
    if ('manifest' in out) expect(manifestBytes(out.manifest)).toBe(3);
  });

  it('names every problem at its JSON pointer', () => {
    const out = parseCaptureManifest(
      {
        files: [
          { path: '../x', bytes: 1, sha256: H },
          { path: 'ok.jpg', bytes: -1, sha256: 'nothex' },
          { path: 'A.jpg', bytes: 1, sha256: H, extra: 1 },
          { path: 'a.JPG', bytes: 1, sha256: H },
          { path: 'img', bytes: 1, sha256: H },
          { path: 'img/1.jpg', bytes: 1, sha256: H },
          'nope',
        ],
        owner: 'x',
      },
      '/manifest',
    );
    expect(out).toEqual({
      problems: [
        { path: '/manifest/owner', message: 'is not a manifest field (version, files)' },
        { path: '/manifest/files/0/path', message: '"../x" must not contain a ".." segment' },
        { path: '/manifest/files/1/bytes', message: 'must be an integer from 0 to 2^53-1' },
        { path: '/manifest/files/1/sha256', message: 'must be 64 hex characters (the SHA-256 of the file)' },
        { path: '/manifest/files/2/extra', message: 'is not a file field (path, bytes, sha256, content_type)' },
        { path: '/manifest/files/3/path', message: '"a.JPG" repeats files/2 (paths must be unique, ignoring case)' },
        { path: '/manifest/files/6', message: 'must be an object {path, bytes, sha256, content_type}' },
        { path: '/manifest/files/5/path', message: '"img/1.jpg" lies inside "img", which is also a file' },
      ],
    });
  });

  it('refuses what is not a manifest', () => {
    expect(parseCaptureManifest([])).toEqual({
      problems: [{ path: '/', message: 'must be an object {version, files}' }],
    });
    expect(parseCaptureManifest({ version: '1' })).toEqual({
      problems: [{ path: '/files', message: 'must be an array of {path, bytes, sha256, content_type}' }],
    });
    expect(parseCaptureManifest({ version: '', files: [] })).toEqual({
      problems: [{ path: '/version', message: 'must be a string of 1 to 64 characters' }],
    });
  });
});
