-- Polling configs (docs/design.md, 'PostgreSQL and records'): match rules → interval per check
-- type. For each type the highest-priority enabled matching rule that sets an interval wins; no
-- interval = not polled.
CREATE TABLE polling_config (
  id                     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name                   text NOT NULL,
  priority               integer NOT NULL DEFAULT 0,
  enabled                boolean NOT NULL DEFAULT true,
  -- {"carrierId"?: "<id>", "cardStatus"?: "<status>"}; absent keys match everything.
  match                  jsonb NOT NULL DEFAULT '{}'::jsonb,
  interval_card_status_sec integer,
  interval_carddata_sec    integer,
  interval_realname_sec    integer,
  interval_package_sec     integer,
  created_at             timestamptz NOT NULL DEFAULT now(),
  updated_at             timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT polling_config_name_key UNIQUE (name),
  CONSTRAINT polling_config_name_check CHECK (length(btrim(name)) BETWEEN 1 AND 200),
  CONSTRAINT polling_config_match_check CHECK (
    jsonb_typeof(match) = 'object'
    AND (match - 'carrierId' - 'cardStatus') = '{}'::jsonb
    AND (NOT match ? 'carrierId' OR jsonb_typeof(match -> 'carrierId') = 'string')
    AND (NOT match ? 'cardStatus' OR jsonb_typeof(match -> 'cardStatus') = 'string')),
  -- Minimum 1 s (a tighter floor is enforced in code); maximum 400 days.
  CONSTRAINT polling_config_interval_card_status_sec_check CHECK (interval_card_status_sec IS NULL OR interval_card_status_sec BETWEEN 1 AND 34560000),
  CONSTRAINT polling_config_interval_carddata_sec_check CHECK (interval_carddata_sec IS NULL OR interval_carddata_sec BETWEEN 1 AND 34560000),
  CONSTRAINT polling_config_interval_realname_sec_check CHECK (interval_realname_sec IS NULL OR interval_realname_sec BETWEEN 1 AND 34560000),
  CONSTRAINT polling_config_interval_package_sec_check CHECK (interval_package_sec IS NULL OR interval_package_sec BETWEEN 1 AND 34560000)
);
