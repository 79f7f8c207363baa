-- Asynchronous ingest (docs/design.md, 'PostgreSQL and records'): records that can never be written
-- (a constraint violation that is not a duplicate, invalid data) are kept here with the reason
-- instead of being dropped, so an operator can see, fix and replay them. One row per record: a
-- redelivered dead letter is one row.
CREATE TABLE ingest_dead_letter (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  record_id    text NOT NULL,
  card_id      bigint,
  carrier_id   bigint,
  record       jsonb NOT NULL,
  reason       text NOT NULL,
  error_code   text,
  failed_at    timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT ingest_dead_letter_record_key UNIQUE (record_id),
  CONSTRAINT ingest_dead_letter_record_id_check CHECK (length(record_id) BETWEEN 1 AND 300)
);
CREATE INDEX ingest_dead_letter_failed_idx ON ingest_dead_letter (failed_at DESC);

