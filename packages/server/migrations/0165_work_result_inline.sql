-- A result of at most 64 KiB (a chat completion, most embeddings and transcriptions) is kept in its
-- work item's row, written by the statement that completes the work, instead of as an object of
-- its own: one object store write per gateway request was the costliest single item of a request's
-- CPU after the receipt's signature check (issue 22). Larger results stay objects under
-- `results/<work id>`; a row whose result_inline is NULL has its result there (every result
-- written before this migration).
ALTER TABLE work_items ADD COLUMN result_inline bytea;
