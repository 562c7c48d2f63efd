-- Capture sets processed on nodes (kinds 8 and 10): the job that holds the set while it is
-- processing, and the outputs of the last processing run as checked against their manifest.
ALTER TABLE capture_sets ADD COLUMN processing_job_id text;
ALTER TABLE capture_sets ADD COLUMN outputs_json text;
