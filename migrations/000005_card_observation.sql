-- Observations (docs/design.md, 'PostgreSQL and records'): one row per gateway answer or local
-- evaluation.
--
-- Layout for billions of rows: declaratively RANGE-partitioned by observed_at (monthly). Retention
-- is DROP/DETACH of old partitions instead of DELETE, and "one card's recent history" prunes to the
-- newest partitions and then uses the (card_id, observed_at) index inside them. The DEFAULT
-- partition catches rows outside every created month so an insert never fails for a missing
-- partition; create_card_observation_partitions() creates upcoming months ahead of time.
-- No foreign key to iot_card: it would cost an index probe per insert and make deleting a card
-- scan every partition; observations of a deleted card age out with their partition.
CREATE TABLE card_observation (
  -- Collection id: the same observation delivered twice (async ingest retries) is one row.
  observation_id  text NOT NULL,
  observed_at     timestamptz NOT NULL,
  card_id         bigint NOT NULL,
  carrier_id      bigint NOT NULL,
  check_type      text NOT NULL,
  payload         jsonb NOT NULL DEFAULT '{}'::jsonb,
  inserted_at     timestamptz NOT NULL DEFAULT now(),
  -- A unique constraint on a partitioned table must include the partition key, hence the pair.
  CONSTRAINT card_observation_observation_id_observed_at_key UNIQUE (observation_id, observed_at),
  CONSTRAINT card_observation_observation_id_check CHECK (length(observation_id) BETWEEN 1 AND 200),
  CONSTRAINT card_observation_check_type_check CHECK (check_type IN ('card_status', 'carddata', 'realname', 'package'))
) PARTITION BY RANGE (observed_at);

CREATE INDEX card_observation_card_idx ON card_observation (card_id, observed_at DESC);

CREATE TABLE card_observation_default PARTITION OF card_observation DEFAULT;

-- Creates the monthly partitions covering [from_month, from_month + months). Idempotent.
-- Unqualified names resolve through the caller's search_path (our schema).
CREATE FUNCTION create_card_observation_partitions(from_month date, months integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  m date := date_trunc('month', from_month)::date;
  created integer := 0;
  part text;
BEGIN
  FOR i IN 0 .. months - 1 LOOP
    part := format('card_observation_%s', to_char(m + make_interval(months => i), 'YYYYMM'));
    IF to_regclass(part) IS NULL THEN
      EXECUTE format('CREATE TABLE %I PARTITION OF card_observation FOR VALUES FROM (%L) TO (%L)',
        part, m + make_interval(months => i), m + make_interval(months => i + 1));
      created := created + 1;
    END IF;
  END LOOP;
  RETURN created;
END $$;

SELECT create_card_observation_partitions(current_date, 3);

-- One row per cardCheck run (the API's card detail lists these, newest first).
CREATE TABLE card_execution (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  card_id      bigint NOT NULL REFERENCES iot_card (id) ON DELETE CASCADE,
  carrier_id   bigint NOT NULL,
  started_at   timestamptz NOT NULL,
  finished_at  timestamptz,
  types        text[] NOT NULL,
  outcome      text NOT NULL,
  gateway_ms   integer NOT NULL DEFAULT 0,
  workflow_id  text NOT NULL,
  run_id       text NOT NULL,
  from_priority boolean NOT NULL DEFAULT false,
  details      jsonb NOT NULL DEFAULT '{}'::jsonb,
  -- A retried "record execution" activity writes the run once.
  CONSTRAINT card_execution_run_key UNIQUE (workflow_id, run_id),
  CONSTRAINT card_execution_types_check CHECK (types <@ ARRAY['card_status', 'carddata', 'realname', 'package']::text[]),
  CONSTRAINT card_execution_outcome_check CHECK (outcome IN ('success', 'partial', 'failed', 'deferred', 'aborted')),
  CONSTRAINT card_execution_gateway_ms_check CHECK (gateway_ms >= 0),
  CONSTRAINT card_execution_period_check CHECK (finished_at IS NULL OR finished_at >= started_at)
);
CREATE INDEX card_execution_card_idx ON card_execution (card_id, started_at DESC);
