import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { chunkText, countTokens } from './chunking.js';

const sentence = (i: number) => `Sentence number ${i} says something about subject ${i % 5} in a few plain words.`;
const paragraphs = (n: number, per: number) =>
  Array.from({ length: n }, (_, p) => Array.from({ length: per }, (_, s) => sentence(p * per + s)).join(' ')).join(
    '\n\n',
  );

describe('token-aware chunking with overlap', () => {
  it('counts cl100k tokens, special-token markers as plain text', () => {
    expect(countTokens('hello world')).toBe(2);
    expect(countTokens('<|endoftext|>')).toBeGreaterThan(1);
  });

  it('keeps every chunk within the size, cuts at sentence ends, and repeats whole sentences as overlap', async () => {
    const text = paragraphs(20, 6);
    const chunks = await chunkText(text, { size: 80, overlap: 20 });
    expect(chunks.length).toBeGreaterThan(10);
    for (const c of chunks) {
      expect(c.tokens).toBeLessThanOrEqual(80);
      expect(c.tokens).toBe(countTokens(c.text));
      expect(c.text).toBe(text.slice(c.start, c.end));
      expect(c.text).toMatch(/^Sentence number \d+/);
      expect(c.text).toMatch(/words\.$/);
    }
    // Each chunk starts with the last sentence of the one before (a sentence is ~18 tokens <= 20).
    for (let i = 1; i < chunks.length; i++) {
      const previous = chunks[i - 1]?.text ?? '';
      const lastSentence = previous.slice(previous.lastIndexOf('Sentence number'));
      expect(chunks[i]?.text.startsWith(lastSentence)).toBe(true);
      expect(chunks[i]?.start).toBeLessThan(chunks[i - 1]?.end ?? 0);
    }
    // Nothing is lost: the chunks cover the text from its first to its last character.
    expect(chunks[0]?.start).toBe(0);
    expect(chunks.at(-1)?.end).toBe(text.length);
  });

  it('has no overlap with overlap 0, and keeps the paragraph breaks inside a chunk', async () => {
    const text = paragraphs(6, 3);
    const chunks = await chunkText(text, { size: 200, overlap: 0 });
    expect(chunks.length).toBeGreaterThan(1);
    for (let i = 1; i < chunks.length; i++) {
      expect(chunks[i]?.start).toBeGreaterThan(chunks[i - 1]?.end ?? 0);
      expect(text.slice(chunks[i - 1]?.end, chunks[i]?.start).trim()).toBe('');
    }
    expect(chunks[0]?.text).toContain('words.\n\nSentence number 3');
  });

  it('splits a sentence longer than a chunk at words, and a "word" longer than a chunk at characters', async () => {
    const long = Array.from({ length: 300 }, (_, i) => `word${i}`).join(' ');
    const byWords = await chunkText(long, { size: 50, overlap: 10 });
    expect(byWords.length).toBeGreaterThan(5);
    for (const c of byWords) expect(c.tokens).toBeLessThanOrEqual(50);
    const blob = 'x'.repeat(3000) + '\u{1F600}'.repeat(50);
    const byChars = await chunkText(blob, { size: 40, overlap: 0 });
    for (const c of byChars) expect(c.tokens).toBeLessThanOrEqual(40);
    expect(byChars.map((c) => c.text).join('')).toBe(blob);
    expect(byChars.every((c) => !/[\uD800-\uDBFF]$/.test(c.text))).toBe(true);
  });

  it('gives no chunk for empty or blank text', async () => {
    expect(await chunkText('', { size: 100, overlap: 10 })).toEqual([]);
    expect(await chunkText('  \n\n \t ', { size: 100, overlap: 10 })).toEqual([]);
  });

  it('holds for any text: within size, in order, inside the text, covering every non-blank character', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.string({ maxLength: 1500 }),
        fc.integer({ min: 8, max: 120 }),
        fc.integer({ min: 0, max: 60 }),
        async (text, size, overlap) => {
          const chunks = await chunkText(text, { size, overlap });
          let covered = 0;
          for (const c of chunks) {
            expect(c.tokens).toBeLessThanOrEqual(size);
            expect(text.slice(c.start, c.end)).toBe(c.text);
            expect(c.start).toBeGreaterThanOrEqual(0);
            if (c.start > covered) expect(text.slice(covered, c.start).trim()).toBe('');
            covered = Math.max(covered, c.end);
          }
          expect(text.slice(covered).trim()).toBe('');
        },
      ),
      { numRuns: 150 },
    );
  });
});
