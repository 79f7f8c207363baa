-- Failure alerts per (card, type) and account-level alerts (docs/design.md, 'PostgreSQL and records':
-- the record).
CREATE TABLE polling_failure_alert (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  card_id          bigint NOT NULL REFERENCES iot_card (id) ON DELETE CASCADE,
  -- The account the card was polled under when the alert opened (account alerts count these).
  carrier_id       bigint NOT NULL REFERENCES carrier_account (id) ON DELETE CASCADE,
  check_type       text NOT NULL,
  status           text NOT NULL DEFAULT 'open',
  fail_count       integer NOT NULL,
  first_failed_at  timestamptz,
  last_error       text,
  opened_at        timestamptz NOT NULL DEFAULT now(),
  recovered_at     timestamptz,
  acked_at         timestamptz,
  acked_by         text,
  CONSTRAINT polling_failure_alert_check_type_check CHECK (check_type IN ('card_status', 'carddata', 'realname', 'package')),
  CONSTRAINT polling_failure_alert_status_check CHECK (status IN ('open', 'recovered')),
  CONSTRAINT polling_failure_alert_fail_count_check CHECK (fail_count >= 1),
  CONSTRAINT polling_failure_alert_recovered_check CHECK ((status = 'recovered') = (recovered_at IS NOT NULL))
);
-- At most one open alert per (card, type): retried "open" calls land on the same row.
CREATE UNIQUE INDEX polling_failure_alert_open_key ON polling_failure_alert (card_id, check_type) WHERE status = 'open';
-- Account alert window count and alert listings.
CREATE INDEX polling_failure_alert_carrier_opened_idx ON polling_failure_alert (carrier_id, opened_at);
CREATE INDEX polling_failure_alert_card_idx ON polling_failure_alert (card_id, opened_at DESC);

CREATE TABLE carrier_alert (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  carrier_id    bigint NOT NULL REFERENCES carrier_account (id) ON DELETE CASCADE,
  kind          text NOT NULL,
  status        text NOT NULL DEFAULT 'open',
  -- Failure alerts counted in the window when (last) evaluated, and the limits used.
  alert_count   integer NOT NULL,
  threshold     integer NOT NULL,
  window_ms     integer NOT NULL,
  opened_at     timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  resolved_at   timestamptz,
  acked_at      timestamptz,
  acked_by      text,
  CONSTRAINT carrier_alert_kind_check CHECK (kind IN ('failure_burst', 'ingest_backlog')),
  CONSTRAINT carrier_alert_status_check CHECK (status IN ('open', 'resolved')),
  CONSTRAINT carrier_alert_resolved_check CHECK ((status = 'resolved') = (resolved_at IS NOT NULL)),
  CONSTRAINT carrier_alert_count_check CHECK (alert_count >= 0 AND threshold >= 1 AND window_ms >= 1)
);
CREATE UNIQUE INDEX carrier_alert_open_key ON carrier_alert (carrier_id, kind) WHERE status = 'open';
CREATE INDEX carrier_alert_opened_idx ON carrier_alert (opened_at DESC);
