-- Transactional outbox of lifecycle events: each row names one (card, account) pair whose Redis
-- keys must be brought in line with PostgreSQL. A lifecycle write inserts its rows in the same
-- transaction as the card change, so a crash or a Redis error after the commit leaves the rows
-- behind for the relay (src/lifecycle/outboxRelay.ts), which applies them until they succeed.
-- A row carries no state to apply: the relay derives it from the card as PostgreSQL has it when
-- it applies, so rows can be applied in any order, more than once. No foreign key: the row of a
-- deleted card must stay (it takes the card out of Redis).
CREATE TABLE lifecycle_outbox (
  id              bigserial PRIMARY KEY,
  card_id         bigint NOT NULL,
  carrier_id      bigint NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  -- When the relay may take the row: a little after the commit (the writer applies it itself
  -- first), then pushed forward by each claim and by the backoff after each failed attempt.
  next_attempt_at timestamptz NOT NULL,
  attempts        integer NOT NULL DEFAULT 0,
  last_error      text
);

CREATE INDEX lifecycle_outbox_next_attempt ON lifecycle_outbox (next_attempt_at);
CREATE INDEX lifecycle_outbox_card ON lifecycle_outbox (card_id);
