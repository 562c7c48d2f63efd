import { convert } from 'html-to-text';
import { marked } from 'marked';
import { ApiError } from '../../platform/errors.js';

/**
 * What a knowledge base accepts, recognised by content first (a PDF is a PDF whatever its name),
 * then by declared type or file extension, and the text extracted from each: plain text as it
 * is, Markdown and HTML through a maintained parser (marked, html-to-text), PDF through pdf.js
 * (unpdf).
 */

export const DOCUMENT_FORMATS = ['text/plain', 'text/markdown', 'text/html', 'application/pdf'] as const;
export type DocumentFormat = (typeof DOCUMENT_FORMATS)[number];

const SUPPORTED = 'plain text, Markdown, HTML or PDF';

function extensionOf(name: string | undefined): string {
  const match = /\.([A-Za-z0-9]{1,10})$/.exec(name ?? '');
  return match?.[1]?.toLowerCase() ?? '';
}

function declaredFormat(declared: string | undefined, name: string | undefined): DocumentFormat | undefined {
  const type = (declared ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  const ext = extensionOf(name);
  if (type === 'application/pdf' || ext === 'pdf') return 'application/pdf';
  if (type === 'text/html' || type === 'application/xhtml+xml' || ext === 'html' || ext === 'htm' || ext === 'xhtml')
    return 'text/html';
  if (type === 'text/markdown' || type === 'text/x-markdown' || ext === 'md' || ext === 'markdown' || ext === 'mdx')
    return 'text/markdown';
  if (type === 'text/plain' || ext === 'txt') return 'text/plain';
  return undefined;
}

/**
 * The format of an uploaded document. Throws `415 unsupported_media_type` for anything that is
 * neither a PDF nor UTF-8 text (images, office files, archives), and for a file named or declared
 * a PDF that is not one.
 *
 * @example
 * detectFormat(Buffer.from('# Title'), { name: 'notes.md' }); // 'text/markdown'
 */
export function detectFormat(
  bytes: Buffer,
  hints: { name?: string | undefined; declared?: string | undefined },
): DocumentFormat {
  if (bytes.subarray(0, 5).toString('latin1') === '%PDF-') return 'application/pdf';
  const declared = declaredFormat(hints.declared, hints.name);
  if (declared === 'application/pdf')
    throw new ApiError(
      'unsupported_media_type',
      `${hints.name ?? 'the document'} is named or declared a PDF but is not one (no %PDF- header)`,
    );
  if (bytes.includes(0) || !isUtf8(bytes)) {
    throw new ApiError(
      'unsupported_media_type',
      `${hints.name ?? 'the document'} is neither a PDF nor UTF-8 text; send ${SUPPORTED}`,
    );
  }
  if (declared) return declared;
  const head = bytes.subarray(0, 1024).toString('utf8').trimStart().toLowerCase();
  if (head.startsWith('<!doctype html') || head.startsWith('<html')) return 'text/html';
  return 'text/plain';
}

function isUtf8(bytes: Buffer): boolean {
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    return true;
  } catch {
    return false;
  }
}

/** Line endings to `\n`, no NUL (PostgreSQL text cannot hold it), no BOM, runs of blank lines to one. */
export function normalizeText(text: string): string {
  return text
    .replace(/^\uFEFF/, '')
    .replace(/\r\n?/g, '\n')
    .replaceAll('\u0000', '')
    .replace(/[ \t]+\n/g, '\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

const HTML_OPTIONS = {
  wordwrap: false as const,
  limits: { maxInputLength: 256 * 1024 * 1024 },
  selectors: [
    { selector: 'a', options: { ignoreHref: true } },
    { selector: 'img', format: 'skip' },
    { selector: 'script', format: 'skip' },
    { selector: 'style', format: 'skip' },
    { selector: 'nav', format: 'skip' },
    ...['h1', 'h2', 'h3', 'h4', 'h5', 'h6'].map((h) => ({ selector: h, options: { uppercase: false } })),
    { selector: 'table', format: 'dataTable', options: { uppercaseHeaderCells: false } },
  ],
};

/**
 * The text of a document, normalised, with its page count for PDFs. Throws `invalid_request`
 * when a PDF cannot be read or nothing readable is in the document (a scanned PDF has no text:
 * OCR is not done).
 *
 * @example
 * (await extractText(Buffer.from('<p>Hi <b>there</b></p>'), 'text/html')).text; // 'Hi there'
 */
export async function extractText(bytes: Buffer, format: DocumentFormat): Promise<{ text: string; pages?: number }> {
  let text: string;
  let pages: number | undefined;
  switch (format) {
    case 'text/plain':
      text = bytes.toString('utf8');
      break;
    case 'text/markdown':
      text = convert(await marked.parse(bytes.toString('utf8'), { async: true, gfm: true }), HTML_OPTIONS);
      break;
    case 'text/html':
      text = convert(bytes.toString('utf8'), HTML_OPTIONS);
      break;
    case 'application/pdf': {
      const { extractText: pdfText, getDocumentProxy } = await import('unpdf');
      try {
        const pdf = await getDocumentProxy(new Uint8Array(bytes));
        const out = await pdfText(pdf, { mergePages: false });
        pages = out.totalPages;
        text = out.text.join('\n\n');
        await pdf.destroy();
      } catch (err) {
        throw new ApiError(
          'invalid_request',
          `the PDF could not be read: ${err instanceof Error ? err.message : String(err)}`,
        );
      }
      break;
    }
  }
  text = normalizeText(text);
  if (text === '')
    throw new ApiError(
      'invalid_request',
      format === 'application/pdf'
        ? 'the PDF has no extractable text (scanned pages are not OCRed)'
        : 'the document has no text',
    );
  return pages === undefined ? { text } : { text, pages };
}
