-- Durable request-check items and their audit trail (docs/design.md, 'Request-check and priority
-- items').
CREATE TABLE polling_priority_item (
  id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  card_id            bigint NOT NULL REFERENCES iot_card (id) ON DELETE CASCADE,
  status             text NOT NULL DEFAULT 'pending',
  types              text[] NOT NULL,
  -- requestCheck options kept so that a rebuild can re-request the item exactly.
  lane               text NOT NULL DEFAULT 'priority',
  cooldown_ms        integer NOT NULL DEFAULT 0,
  confirm_delays_sec integer[] NOT NULL DEFAULT '{}',
  expected           text,
  trigger_count      integer NOT NULL DEFAULT 1,
  first_actor        text NOT NULL,
  first_source       text NOT NULL,
  last_actor         text NOT NULL,
  last_source        text NOT NULL,
  last_triggered_at  timestamptz NOT NULL,
  attempt_count      integer NOT NULL DEFAULT 0,
  attempt_limit      integer NOT NULL DEFAULT 3,
  claim_token        text,
  claimed_at         timestamptz,
  started_at         timestamptz,
  finished_at        timestamptz,
  next_run_at        timestamptz,
  result             text,
  failure_reason     text,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT polling_priority_item_status_check CHECK (status IN ('pending', 'processing', 'completed', 'failed')),
  CONSTRAINT polling_priority_item_types_check CHECK (cardinality(types) >= 1 AND types <@ ARRAY['card_status', 'carddata', 'realname', 'package']::text[]),
  CONSTRAINT polling_priority_item_lane_check CHECK (lane IN ('priority', 'normal')),
  CONSTRAINT polling_priority_item_cooldown_check CHECK (cooldown_ms >= 0),
  CONSTRAINT polling_priority_item_result_check CHECK (result IS NULL OR result IN ('success', 'failed')),
  CONSTRAINT polling_priority_item_attempts_check CHECK (attempt_limit >= 1 AND attempt_count >= 0 AND attempt_count <= attempt_limit),
  CONSTRAINT polling_priority_item_trigger_count_check CHECK (trigger_count >= 1),
  -- A processing item always knows who claimed it and when (lease take-over needs both).
  CONSTRAINT polling_priority_item_claim_check CHECK (status <> 'processing' OR (claim_token IS NOT NULL AND claimed_at IS NOT NULL))
);
-- One active (pending or processing) item per card: repeated triggers merge into it.
CREATE UNIQUE INDEX polling_priority_item_active_card_key ON polling_priority_item (card_id) WHERE status IN ('pending', 'processing');
-- Rebuild re-requests pending items; lease take-over scans processing ones.
CREATE INDEX polling_priority_item_active_status_idx ON polling_priority_item (status, claimed_at) WHERE status IN ('pending', 'processing');

-- Append-only audit trail; written in the transaction of the change it records.
CREATE TABLE audit_log (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  entity_type  text NOT NULL,
  entity_id    text NOT NULL,
  action       text NOT NULL,
  actor        text NOT NULL,
  source       text NOT NULL,
  reason       text,
  before       jsonb,
  after        jsonb,
  occurred_at  timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT audit_log_entity_type_check CHECK (entity_type IN ('polling_priority_item', 'system_config', 'carrier_account', 'iot_card', 'polling_config'))
);
CREATE INDEX audit_log_entity_idx ON audit_log (entity_type, entity_id, id);
