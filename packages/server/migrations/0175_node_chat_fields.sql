-- What each node's engine honours of a chat request beyond the plain fields (tools, response_format,
-- stop, seed, ...), per catalogue chat model, as its registration declares it (issue 41, DESIGN.md
-- section 10). NULL: an agent that declares nothing honours only the plain fields. Routing reads it,
-- so a change is announced like the other routing columns (0160).
ALTER TABLE nodes ADD COLUMN chat_fields jsonb;

DROP TRIGGER nodes_routing_changed ON nodes;
CREATE TRIGGER nodes_routing_changed AFTER UPDATE ON nodes
  FOR EACH ROW WHEN (
    OLD.org_id IS DISTINCT FROM NEW.org_id OR OLD.country IS DISTINCT FROM NEW.country
    OR OLD.region IS DISTINCT FROM NEW.region OR OLD.gpu_model IS DISTINCT FROM NEW.gpu_model
    OR OLD.models IS DISTINCT FROM NEW.models OR OLD.attestation_verified IS DISTINCT FROM NEW.attestation_verified
    OR OLD.attestation_expires_at IS DISTINCT FROM NEW.attestation_expires_at
    OR OLD.chat_fields IS DISTINCT FROM NEW.chat_fields
    OR NEW.last_seen IS NULL OR NEW.last_seen < OLD.last_seen
  )
  EXECUTE FUNCTION svc_nodes_changed();
