-- A change of a card's state at the carrier, as the carrier dated it (a gateway answer's
-- `changedAt`), and when the product first learned it: the earliest observation that carried it.
-- Staleness is learned_at - changed_at (docs/design.md, 'Freshness'). One row per change, so the
-- table grows with changes, not with checks; retention deletes rows by learned_at.
CREATE TABLE card_change (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  card_id     bigint NOT NULL REFERENCES iot_card (id) ON DELETE CASCADE,
  carrier_id  bigint NOT NULL,
  check_type  text NOT NULL,
  changed_at  timestamptz NOT NULL,
  learned_at  timestamptz NOT NULL,
  CONSTRAINT card_change_key UNIQUE (card_id, check_type, changed_at),
  CONSTRAINT card_change_check_type_check CHECK (check_type IN ('card_status', 'carddata', 'realname', 'package'))
);
CREATE INDEX card_change_carrier_learned_idx ON card_change (carrier_id, learned_at);
