-- Carrier accounts and their rate-limit layout (docs/design.md, 'The job' and 'PostgreSQL and
-- records'; the API's carrier fields: src/api/schemas.ts).
CREATE TABLE carrier_account (
  id                       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name                     text NOT NULL,
  gateway_account          text NOT NULL,
  enabled                  boolean NOT NULL DEFAULT true,
  inflight_limit           integer NOT NULL DEFAULT 50,
  priority_ratio           numeric(4, 3) NOT NULL DEFAULT 0.2,
  lease_ms                 integer NOT NULL DEFAULT 60000,
  step_timeout_ms          integer NOT NULL DEFAULT 10000,
  total_timeout_ms         integer NOT NULL DEFAULT 45000,
  realname_control         boolean NOT NULL DEFAULT false,
  backoff_base_ms          integer NOT NULL DEFAULT 30000,
  -- Consecutive failures of one (card, type) that open a failure alert.
  failure_alert_threshold  integer NOT NULL DEFAULT 3,
  -- Account alert: more than account_alert_threshold failure alerts opened within account_alert_window_ms.
  account_alert_threshold  integer NOT NULL DEFAULT 50,
  account_alert_window_ms  integer NOT NULL DEFAULT 600000,
  created_at               timestamptz NOT NULL DEFAULT now(),
  updated_at               timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT carrier_account_name_key UNIQUE (name),
  CONSTRAINT carrier_account_name_check CHECK (length(btrim(name)) BETWEEN 1 AND 200),
  CONSTRAINT carrier_account_gateway_account_check CHECK (length(btrim(gateway_account)) BETWEEN 1 AND 200),
  CONSTRAINT carrier_account_inflight_limit_check CHECK (inflight_limit BETWEEN 1 AND 100000),
  CONSTRAINT carrier_account_priority_ratio_check CHECK (priority_ratio BETWEEN 0 AND 1),
  CONSTRAINT carrier_account_lease_ms_check CHECK (lease_ms BETWEEN 1000 AND 3600000),
  CONSTRAINT carrier_account_step_timeout_ms_check CHECK (step_timeout_ms BETWEEN 100 AND 600000),
  -- The whole execution must fit in the lease, and at least one step in the whole execution.
  CONSTRAINT carrier_account_total_timeout_ms_check CHECK (total_timeout_ms >= step_timeout_ms AND total_timeout_ms <= lease_ms),
  CONSTRAINT carrier_account_backoff_base_ms_check CHECK (backoff_base_ms BETWEEN 100 AND 86400000),
  CONSTRAINT carrier_account_failure_alert_threshold_check CHECK (failure_alert_threshold BETWEEN 1 AND 1000),
  CONSTRAINT carrier_account_account_alert_threshold_check CHECK (account_alert_threshold BETWEEN 1 AND 1000000),
  CONSTRAINT carrier_account_account_alert_window_ms_check CHECK (account_alert_window_ms BETWEEN 1000 AND 604800000)
);

-- One shared limiter per (account, group); several check types may share a group.
CREATE TABLE rate_limit_group (
  carrier_id  bigint NOT NULL REFERENCES carrier_account (id) ON DELETE CASCADE,
  name        text NOT NULL,
  qps         numeric(10, 3) NOT NULL,
  PRIMARY KEY (carrier_id, name),
  -- Group names end up in Redis key names: keep them to a safe alphabet.
  CONSTRAINT rate_limit_group_name_check CHECK (name ~ '^[A-Za-z0-9_.-]{1,64}$'),
  CONSTRAINT rate_limit_group_qps_check CHECK (qps > 0 AND qps <= 100000)
);

-- Which group a gateway check type is counted against. `package` is local and has no group.
CREATE TABLE check_type_group (
  carrier_id  bigint NOT NULL,
  check_type  text NOT NULL,
  group_name  text NOT NULL,
  PRIMARY KEY (carrier_id, check_type),
  -- Renaming/deleting a group must carry or drop the mapping, never leave it dangling.
  FOREIGN KEY (carrier_id, group_name) REFERENCES rate_limit_group (carrier_id, name) ON UPDATE CASCADE ON DELETE CASCADE,
  CONSTRAINT check_type_group_check_type_check CHECK (check_type IN ('card_status', 'carddata', 'realname'))
);
