import { describe, expect, it } from 'vitest';
import { createTextPdf } from '../../../test/documents.js';
import { ApiError } from '../../platform/errors.js';
import { detectFormat, extractText, normalizeText } from './extract.js';

const refusal = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    return err instanceof ApiError ? `${err.status} ${err.code}` : String(err);
  }
  return 'accepted';
};

describe('document formats and text extraction', () => {
  it('recognises a PDF by its content, whatever its name, and refuses a fake one', () => {
    const pdf = createTextPdf([['hello']]);
    expect(detectFormat(pdf, { name: 'notes.txt', declared: 'text/plain' })).toBe('application/pdf');
    expect(refusal(() => detectFormat(Buffer.from('not really a pdf'), { name: 'report.pdf' }))).toBe(
      '415 unsupported_media_type',
    );
    expect(refusal(() => detectFormat(Buffer.from('plain'), { declared: 'application/pdf' }))).toBe(
      '415 unsupported_media_type',
    );
  });

  it('takes text by declared type, then extension, then a look at the content', () => {
    expect(detectFormat(Buffer.from('# Title'), { name: 'a.md' })).toBe('text/markdown');
    expect(detectFormat(Buffer.from('# Title'), { declared: 'text/markdown; charset=utf-8' })).toBe('text/markdown');
    expect(detectFormat(Buffer.from('<p>x</p>'), { name: 'page.HTM' })).toBe('text/html');
    expect(detectFormat(Buffer.from('  <!DOCTYPE html><p>x'), {})).toBe('text/html');
    expect(detectFormat(Buffer.from('a,b\n1,2'), { name: 'data.csv', declared: 'text/csv' })).toBe('text/plain');
    expect(detectFormat(Buffer.from('just words'), {})).toBe('text/plain');
  });

  it('refuses binary files that are not PDFs: images, archives, invalid UTF-8', () => {
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]);
    expect(refusal(() => detectFormat(png, { name: 'photo.png', declared: 'image/png' }))).toBe(
      '415 unsupported_media_type',
    );
    expect(
      refusal(() => detectFormat(Buffer.from([0x50, 0x4b, 0x03, 0x04, 0x14, 0x00]), { name: 'report.docx' })),
    ).toBe('415 unsupported_media_type');
    expect(refusal(() => detectFormat(Buffer.from([0x66, 0x6f, 0xff, 0xfe]), {}))).toBe('415 unsupported_media_type');
  });

  it('extracts Markdown and HTML as plain text: no markup, no scripts or styles, no link targets', async () => {
    const md = await extractText(
      Buffer.from('# Heading\n\nSome *emphasis* and a [link](https://example.com).\n\n- one\n- two\n'),
      'text/markdown',
    );
    expect(md.text).toBe('Heading\n\nSome emphasis and a link.\n\n * one\n * two');
    const html = await extractText(
      Buffer.from(
        '<html><head><style>p{color:red}</style><title>T</title></head><body><h2>Title</h2><p>Hello <b>world</b> &amp; <a href="https://x.test">friends</a></p><script>alert(1)</script></body></html>',
      ),
      'text/html',
    );
    expect(html.text).toBe('Title\n\nHello world & friends');
  });

  it('extracts the text of every PDF page and counts pages', async () => {
    const out = await extractText(
      createTextPdf([['First page line (one).', 'Second line.'], ['Last page.']]),
      'application/pdf',
    );
    expect(out.pages).toBe(2);
    expect(out.text).toContain('First page line (one).');
    expect(out.text).toContain('Second line.');
    expect(out.text).toContain('Last page.');
  });

  it('fails clearly on a broken PDF, a PDF without text and a document without text', async () => {
    await expect(extractText(Buffer.from('%PDF-1.4\nthis is not a real pdf body'), 'application/pdf')).rejects.toThrow(
      /could not be read/,
    );
    await expect(extractText(createTextPdf([[]]), 'application/pdf')).rejects.toThrow(/no extractable text/);
    await expect(extractText(Buffer.from('<script>x()</script>'), 'text/html')).rejects.toThrow(/no text/);
  });

  it('normalises line endings, drops NUL and BOM, and collapses runs of blank lines', () => {
    expect(normalizeText('\uFEFFa\r\nb\rc\u0000d  \n\n\n\ne')).toBe('a\nb\ncd\n\ne');
  });
});
