import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ProtocolError } from './errors.js';
import { eventHash } from './evidence-hash.js';
import { eventHashInput, parentsOf, type EvidenceEventInput } from './evidence.js';
import { canonicalJson } from './jcs.js';

const event: EvidenceEventInput = {
  run_id: 'run_1',
  sequence: 2,
  event_type: 'policy.evaluated',
  subject_id: 'job_1',
  summary: 'ok',
  metadata: { allowed: true },
  created_at: '2026-11-21T18:00:00.000Z',
  parents: [{ event_id: 'evt_1', edge_type: 'then' }],
};

function pathOf(change: Record<string, unknown>): string | undefined {
  try {
    eventHash({ ...event, ...change } as EvidenceEventInput);
  } catch (err) {
    if (err instanceof ProtocolError) return err.path;
    throw err;
  }
  return 'did not throw';
}

describe('eventHash', () => {
  it('is SHA-256(0x00 || JCS(event)) in hex', () => {
    const jcs = canonicalJson(event);
    const expected = createHash('sha256')
      .update(Buffer.from([0]))
      .update(jcs, 'utf8')
      .digest('hex');
    expect(eventHash(event)).toBe(expected);
  });

  it('hashes only the eight covered fields, so an API event can be passed as is', () => {
    const apiEvent = { ...event, id: 'evt_2', event_hash: 'ignored' };
    expect(eventHash(apiEvent)).toBe(eventHash(event));
    // The recorder passes its parents with their sequence (what it sorted them by).
    const withSequence = { ...event, parents: [{ event_id: 'evt_1', edge_type: 'then', sequence: 1 }] };
    expect(eventHash(withSequence)).toBe(eventHash(event));
    expect(Object.keys(eventHashInput(apiEvent)).sort()).toEqual([
      'created_at',
      'event_type',
      'metadata',
      'parents',
      'run_id',
      'sequence',
      'subject_id',
      'summary',
    ]);
  });

  it('covers every field, including the edges', () => {
    const base = eventHash(event);
    const changes: Partial<EvidenceEventInput>[] = [
      { run_id: 'run_2' },
      { sequence: 3 },
      { event_type: 'job.assigned' },
      { subject_id: 'job_2' },
      { summary: 'ok.' },
      { metadata: { allowed: false } },
      { created_at: '2026-11-21T18:00:00.001Z' },
      { parents: [] },
      { parents: [{ event_id: 'evt_1', edge_type: 'caused_by' }] },
    ];
    for (const change of changes) expect(eventHash({ ...event, ...change })).not.toBe(base);
  });

  it.each<[Record<string, unknown>, string]>([
    [{ created_at: '2026-11-21T18:00:00Z' }, '/created_at'],
    [{ created_at: '2026-11-21T18:00:00.000+00:00' }, '/created_at'],
    [{ created_at: '2026-11-21 18:00:00.000Z' }, '/created_at'],
    [{ sequence: 0 }, '/sequence'],
    [{ sequence: 1.5 }, '/sequence'],
    [{ metadata: null }, '/metadata'],
    [{ metadata: [] }, '/metadata'],
    [{ summary: null }, '/summary'],
    [{ run_id: 1 }, '/run_id'],
    [{ parents: 'evt_1' }, '/parents'],
    [{ parents: [{ event_id: 'evt_1' }] }, '/parents/0/edge_type'],
    [{ metadata: { n: Number.NaN } }, '/metadata/n'],
  ])('rejects %j at %s', (change, path) => {
    expect(pathOf(change)).toBe(path);
  });
});

describe('parentsOf', () => {
  const events = [
    { id: 'a', sequence: 1 },
    { id: 'b', sequence: 2 },
    { id: 'c', sequence: 3 },
  ];

  it('lists incoming edges by the parent sequence, then by edge type', () => {
    const edges = [
      { from_event_id: 'b', to_event_id: 'c', edge_type: 'then' },
      { from_event_id: 'a', to_event_id: 'c', edge_type: 'then' },
      { from_event_id: 'a', to_event_id: 'c', edge_type: 'caused_by' },
      { from_event_id: 'a', to_event_id: 'b', edge_type: 'then' },
    ];
    expect(parentsOf('c', events, edges)).toEqual([
      { event_id: 'a', edge_type: 'caused_by' },
      { event_id: 'a', edge_type: 'then' },
      { event_id: 'b', edge_type: 'then' },
    ]);
    expect(parentsOf('a', events, edges)).toEqual([]);
  });

  it('rejects an edge from an unknown event', () => {
    expect(() => parentsOf('c', events, [{ from_event_id: 'x', to_event_id: 'c', edge_type: 'then' }])).toThrow(
      ProtocolError,
    );
  });
});
