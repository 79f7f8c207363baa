-- Pushed carrier events (docs/design.md, 'Freshness'; docs/gateway-contract.md, 'Pushed events').
-- An account's event secret authenticates what its carrier pushes (HMAC over the body); without
-- one the account accepts no events. Each event is stored before POST /v1/events answers 2xx, once
-- per (account, event id), and applied once in the background: `pending` → `applied`, or
-- `unknown_card` when the account holds no card with the event's ICCID.
ALTER TABLE carrier_account ADD COLUMN event_secret text,
  ADD CONSTRAINT carrier_account_event_secret_check CHECK (event_secret IS NULL OR length(event_secret) BETWEEN 16 AND 200);

CREATE TABLE carrier_event (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  carrier_id   bigint NOT NULL REFERENCES carrier_account (id) ON DELETE CASCADE,
  event_id     text NOT NULL,
  check_type   text NOT NULL,
  iccid        text NOT NULL,
  observed_at  timestamptz NOT NULL,
  changed_at   timestamptz,
  observation  jsonb NOT NULL,
  received_at  timestamptz NOT NULL DEFAULT now(),
  status       text NOT NULL DEFAULT 'pending',
  applied_at   timestamptz,
  card_id      bigint,
  CONSTRAINT carrier_event_key UNIQUE (carrier_id, event_id),
  CONSTRAINT carrier_event_event_id_check CHECK (length(event_id) BETWEEN 1 AND 200),
  CONSTRAINT carrier_event_check_type_check CHECK (check_type IN ('card_status', 'carddata', 'realname')),
  CONSTRAINT carrier_event_status_check CHECK (status IN ('pending', 'applied', 'unknown_card'))
);
-- The applier takes the oldest pending events; the backlog bound counts them.
CREATE INDEX carrier_event_pending_idx ON carrier_event (id) WHERE status = 'pending';
-- Retention deletes by received_at.
CREATE INDEX carrier_event_received_idx ON carrier_event (received_at);
