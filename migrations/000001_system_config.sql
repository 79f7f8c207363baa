-- System-wide settings (docs/design.md, 'PostgreSQL and records'): polling.mode (carrier | legacy),
-- polling.ingest.mode (sync | async).
CREATE TABLE system_config (
  key        text PRIMARY KEY,
  value      jsonb NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  updated_by text NOT NULL DEFAULT 'migration'
);

INSERT INTO system_config (key, value) VALUES
  ('polling.mode', '"carrier"'),
  ('polling.ingest.mode', '"sync"');

ALTER TABLE system_config ADD CONSTRAINT system_config_polling_mode_check
  CHECK (key <> 'polling.mode' OR value IN ('"carrier"'::jsonb, '"legacy"'::jsonb));
ALTER TABLE system_config ADD CONSTRAINT system_config_ingest_mode_check
  CHECK (key <> 'polling.ingest.mode' OR value IN ('"sync"'::jsonb, '"async"'::jsonb));
