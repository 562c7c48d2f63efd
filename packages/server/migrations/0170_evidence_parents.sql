-- An evidence event keeps its incoming edges in its own row, as the `parents` list its hash covers
-- (DESIGN.md section 11): JSON text `[{"event_id": ..., "edge_type": "then" | "caused_by"}, ...]`
-- ordered by the parent's sequence, then the edge type. They were rows of `evidence_edges`, about
-- 14 for each gateway request against 9 events, each with three foreign key checks: 44 % of the
-- rows a request inserted (issue 22). Nothing read an edge but its run's graph, which now reads
-- the edges from its events. The hash chain, not a foreign key, binds a parent to its event: a
-- verifier recomputes every event hash from its parents and the root from the hashes.
ALTER TABLE evidence_events ADD COLUMN parents text NOT NULL DEFAULT '[]';

UPDATE evidence_events e
   SET parents = p.parents
  FROM (SELECT d.to_event_id,
               json_agg(json_build_object('event_id', d.from_event_id, 'edge_type', d.edge_type)
                        ORDER BY f.sequence, d.edge_type)::text AS parents
          FROM evidence_edges d JOIN evidence_events f ON f.id = d.from_event_id
         GROUP BY d.to_event_id) p
 WHERE e.id = p.to_event_id;

ALTER TABLE evidence_events ALTER COLUMN parents DROP DEFAULT;

DROP TABLE evidence_edges;
