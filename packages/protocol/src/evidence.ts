import { ProtocolError } from './errors.js';

/** Evidence certificate `version`. */
export const EVIDENCE_CERT_VERSION = 'SVC2-draft';
/** Evidence certificate `algorithm`. */
export const EVIDENCE_CERT_ALGORITHM = 'ed25519-sha256';
/** Evidence bundle `type`. */
export const BUNDLE_TYPE = 'svc.evidence_bundle.v1';
/** `created_at` as the API returns it: ISO 8601 UTC with milliseconds. */
export const EVIDENCE_TIMESTAMP_PATTERN = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** An incoming edge of an event, as hashed. */
export interface EvidenceParent {
  event_id: string;
  edge_type: string;
}

/** Exactly the fields an event hash covers; `parents` ordered by the parent's `sequence`. */
export interface EvidenceEventInput {
  run_id: string;
  sequence: number;
  event_type: string;
  subject_id: string;
  summary: string;
  metadata: Record<string, unknown>;
  created_at: string;
  parents: readonly EvidenceParent[];
}

function requireString(value: unknown, path: string): string {
  if (typeof value !== 'string') throw new ProtocolError(`${path.slice(1)} must be a string`, path);
  return value;
}

/**
 * The value that is hashed for an event: only the eight covered fields (so an API event with
 * `id` and `event_hash` may be passed as is, with `parents` added), validated.
 *
 * @example
 * canonicalJson(eventHashInput(event)); // the exact bytes behind event_hash, after 0x00
 */
export function eventHashInput(event: EvidenceEventInput): EvidenceEventInput {
  const { sequence, metadata, created_at, parents } = event;
  if (!Number.isSafeInteger(sequence) || sequence < 1) {
    throw new ProtocolError('sequence must be an integer from 1', '/sequence');
  }
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) {
    throw new ProtocolError('metadata must be an object', '/metadata');
  }
  if (typeof created_at !== 'string' || !EVIDENCE_TIMESTAMP_PATTERN.test(created_at)) {
    throw new ProtocolError('created_at must look like 2026-11-21T18:00:00.000Z', '/created_at');
  }
  if (!Array.isArray(parents)) throw new ProtocolError('parents must be an array', '/parents');
  return {
    run_id: requireString(event.run_id, '/run_id'),
    sequence,
    event_type: requireString(event.event_type, '/event_type'),
    subject_id: requireString(event.subject_id, '/subject_id'),
    summary: requireString(event.summary, '/summary'),
    metadata,
    created_at,
    parents: parents.map((parent: EvidenceParent, i) => ({
      event_id: requireString(parent.event_id, `/parents/${i}/event_id`),
      edge_type: requireString(parent.edge_type, `/parents/${i}/edge_type`),
    })),
  };
}

/** The minimal graph shapes {@link parentsOf} reads. */
export interface EvidenceEventRef {
  id: string;
  sequence: number;
}
export interface EvidenceEdgeRef {
  from_event_id: string;
  to_event_id: string;
  edge_type: string;
}

/**
 * The `parents` of an event from the graph: its incoming edges ordered by the parent's
 * `sequence`, then by `edge_type` (two edges from one parent). Throws when an edge names an
 * event that is not in `events`.
 *
 * @example
 * parentsOf('evt_2', graph.events, graph.edges); // [{ event_id: 'evt_1', edge_type: 'then' }]
 */
export function parentsOf(
  eventId: string,
  events: readonly EvidenceEventRef[],
  edges: readonly EvidenceEdgeRef[],
): EvidenceParent[] {
  const sequenceOf = new Map(events.map((e) => [e.id, e.sequence]));
  return edges
    .filter((edge) => edge.to_event_id === eventId)
    .map((edge) => {
      const sequence = sequenceOf.get(edge.from_event_id);
      if (sequence === undefined) throw new ProtocolError(`unknown event ${edge.from_event_id}`, '/edges');
      return { sequence, event_id: edge.from_event_id, edge_type: edge.edge_type };
    })
    .sort((a, b) => a.sequence - b.sequence || (a.edge_type < b.edge_type ? -1 : a.edge_type > b.edge_type ? 1 : 0))
    .map(({ event_id, edge_type }) => ({ event_id, edge_type }));
}
