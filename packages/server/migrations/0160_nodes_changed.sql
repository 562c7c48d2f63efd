-- Every instance keeps a directory of the nodes in memory for routing (nodes/directory.ts). A change
-- to what routing reads of a node is announced on the bus's `nodes` topic (channel svc_nodes) by the
-- store itself, whoever wrote it: registration, a heartbeat with new models, an attestation, an
-- operator's statement, a deletion. A node's last_seen moving forward is not announced (every
-- signed call moves it; instances read it every second); moving it back (a node marked down by
-- hand) is.
CREATE FUNCTION svc_nodes_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM pg_notify('svc_nodes', OLD.id);
  ELSE
    PERFORM pg_notify('svc_nodes', NEW.id);
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER nodes_added_or_deleted AFTER INSERT OR DELETE ON nodes
  FOR EACH ROW EXECUTE FUNCTION svc_nodes_changed();

CREATE TRIGGER nodes_routing_changed AFTER UPDATE ON nodes
  FOR EACH ROW WHEN (
    OLD.org_id IS DISTINCT FROM NEW.org_id OR OLD.country IS DISTINCT FROM NEW.country
    OR OLD.region IS DISTINCT FROM NEW.region OR OLD.gpu_model IS DISTINCT FROM NEW.gpu_model
    OR OLD.models IS DISTINCT FROM NEW.models OR OLD.attestation_verified IS DISTINCT FROM NEW.attestation_verified
    OR OLD.attestation_expires_at IS DISTINCT FROM NEW.attestation_expires_at
    OR NEW.last_seen IS NULL OR NEW.last_seen < OLD.last_seen
  )
  EXECUTE FUNCTION svc_nodes_changed();
