import { describe, expect, it } from 'vitest';
import { toCsv } from './csv.js';

/** A strict RFC 4180 reader, to prove what toCsv writes reads back. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"' && field === '') quoted = true;
    else if (c === ',') {
      row.push(field);
      field = '';
    } else if (c === '\r' && text[i + 1] === '\n') {
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
      i++;
    } else if (c === '"' || c === '\r' || c === '\n') throw new Error(`bare ${JSON.stringify(c)} at ${i}`);
    else field += c;
  }
  if (quoted || field !== '' || row.length > 0) throw new Error('unterminated record');
  return rows;
}

describe('toCsv', () => {
  it('writes a header and CRLF records, quoting only what needs it', () => {
    expect(
      toCsv(
        ['a', 'b', 'c'],
        [
          ['x', 12, null],
          ['y', -5, 'z'],
        ],
      ),
    ).toBe('a,b,c\r\nx,12,\r\ny,-5,z\r\n');
  });

  it('quotes commas, quotes and line breaks, and reads back unchanged', () => {
    const nasty = ['a, b', 'say "hi"', 'line1\nline2', 'cr\r\nlf', '"', ''];
    const text = toCsv(
      ['v'],
      nasty.map((v) => [v]),
    );
    expect(text).toBe('v\r\n"a, b"\r\n"say ""hi"""\r\n"line1\nline2"\r\n"cr\r\nlf"\r\n""""\r\n\r\n');
    expect(parseCsv(text)).toEqual([['v'], ...nasty.map((v) => [v])]);
  });

  it('defuses spreadsheet formulas in text but keeps negative numbers', () => {
    const text = toCsv(
      ['d', 'n'],
      [
        ['=HYPERLINK("http://x")', -300],
        ['@SUM(A1)', 0],
        ['+1', 1],
        ['-1', 2],
      ],
    );
    expect(parseCsv(text)).toEqual([
      ['d', 'n'],
      ['\'=HYPERLINK("http://x")', '-300'],
      ["'@SUM(A1)", '0'],
      ["'+1", '1'],
      ["'-1", '2'],
    ]);
  });
});
