/**
 * Documents for knowledge-base tests: a minimal but valid PDF writer (one Helvetica text line per
 * entry, one page per array), and three texts on unrelated topics whose words barely overlap, so
 * the test upstream's hashed bag-of-words embeddings tell them apart; and prose of any size.
 */

function escapePdfText(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\(/g, '\\(').replace(/\)/g, '\\)');
}

/**
 * A PDF 1.4 file with `pages[i]` as the lines of page i (ASCII text), with a correct xref table.
 *
 * @example
 * createTextPdf([['Hello', 'world'], ['Page two']]).subarray(0, 5).toString(); // '%PDF-'
 */
export function createTextPdf(pages: string[][]): Buffer {
  const objects: string[] = [];
  objects[1] = '<< /Type /Catalog /Pages 2 0 R >>';
  objects[2] = `<< /Type /Pages /Kids [${pages.map((_, i) => `${4 + i * 2} 0 R`).join(' ')}] /Count ${pages.length} >>`;
  objects[3] = '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>';
  pages.forEach((lines, i) => {
    const stream = `BT /F1 11 Tf 13 TL 50 760 Td ${lines.map((l) => `(${escapePdfText(l)}) Tj T*`).join(' ')} ET`;
    objects[4 + i * 2] =
      `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents ${5 + i * 2} 0 R >>`;
    objects[5 + i * 2] = `<< /Length ${Buffer.byteLength(stream, 'latin1')} >>\nstream\n${stream}\nendstream`;
  });
  let out = '%PDF-1.4\n';
  const offsets: number[] = [];
  for (let i = 1; i < objects.length; i++) {
    offsets[i] = Buffer.byteLength(out, 'latin1');
    out += `${i} 0 obj\n${objects[i] ?? ''}\nendobj\n`;
  }
  const xref = Buffer.byteLength(out, 'latin1');
  out += `xref\n0 ${objects.length}\n0000000000 65535 f \n`;
  for (let i = 1; i < objects.length; i++) out += `${String(offsets[i] ?? 0).padStart(10, '0')} 00000 n \n`;
  out += `trailer\n<< /Size ${objects.length} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(out, 'latin1');
}

export const VOLCANO_FACTS = [
  'Volcanoes erupt when magma rises through the crust and escapes as lava, ash and volcanic gas.',
  'Basaltic lava from a shield volcano flows at about 1200 degrees Celsius; rhyolitic lava is cooler and stickier.',
  'Mount Etna in Sicily is one of the most active volcanoes on Earth, erupting lava almost every year.',
  'A pyroclastic flow is a fast current of hot volcanic ash and gas that races down the slopes of a volcano.',
  'Volcanologists watch magma chambers with seismometers, tiltmeters and gas sensors to forecast eruptions.',
  'Volcanic ash from large eruptions can cool the climate by blocking sunlight for months.',
];

export const SOURDOUGH_FACTS = [
  'Sourdough bread rises with a starter of wild yeast and lactic bacteria instead of baker yeast.',
  'Feed the starter with flour and water every day until it doubles within six hours of feeding.',
  'A typical sourdough dough uses 75 percent hydration: 750 grams of water for each kilogram of flour.',
  'Shape the loaf, proof it overnight in the fridge, then bake it in a preheated Dutch oven at 250 degrees.',
  'Steam in the oven keeps the crust soft early in the bake so the loaf can spring before the crust sets.',
  'The sour taste of sourdough comes from lactic and acetic acid made by the bacteria in the starter.',
];

export const TIDE_FACTS = [
  'Ocean tides are caused by the gravity of the Moon and the Sun pulling on the rotating Earth.',
  'Most coasts see two high tides and two low tides every lunar day of about 24 hours and 50 minutes.',
  'Spring tides, with the largest range, happen at new moon and full moon when Sun and Moon align.',
  'Neap tides, with the smallest range, happen at the quarter moons when Sun and Moon pull at right angles.',
  'The Bay of Fundy in Canada has the highest tidal range in the world, over 16 metres.',
  'Tide tables predict the time and height of each tide from harmonic constants measured at each port.',
];

const WORDS = [
  'river',
  'granite',
  'harbour',
  'lantern',
  'orchard',
  'signal',
  'meadow',
  'copper',
  'glacier',
  'falcon',
  'thunder',
  'willow',
  'compass',
  'ember',
  'quartz',
  'tundra',
];

/**
 * About `bytes` of varied prose: sentences of words from a small vocabulary, in paragraphs.
 *
 * @example
 * prose(6000).length; // about 6000
 */
export function prose(bytes: number): string {
  const out: string[] = [];
  let size = 0;
  for (let i = 0; size < bytes; i++) {
    const words = Array.from({ length: 12 }, (_, j) => WORDS[(i * 7 + j * 3 + (i >> 4)) % WORDS.length]);
    const sentence = `Entry ${i} notes that the ${words.join(' ')}.`;
    out.push(i % 8 === 7 ? `${sentence}\n\n` : `${sentence} `);
    size += sentence.length + 1;
  }
  return out.join('');
}
