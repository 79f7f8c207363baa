-- A cardBatch run (CARD_RUN_SHAPE=batch) carries many cards and records one execution row per
-- card under the run's own workflow and run ids, so the row that a retried record write must find
-- again is (run, card), not (run). A cardCheck run has one card: its rows are unchanged.
--
-- Deploy note: a card or ingest worker of an earlier release names the former key in its write
-- (ON CONFLICT (workflow_id, run_id)), which PostgreSQL refuses once it is gone; such a worker's
-- record writes retry until it is replaced, so replace those workers with this release's.
ALTER TABLE card_execution DROP CONSTRAINT card_execution_run_key;
ALTER TABLE card_execution ADD CONSTRAINT card_execution_run_key UNIQUE (workflow_id, run_id, card_id);
