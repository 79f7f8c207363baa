-- Devices, cards and the bindings between them (docs/design.md, 'PostgreSQL and records': when a
-- card is polled).
CREATE TABLE device (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  device_no       text NOT NULL,
  -- Device-level polling switch: off takes every bound non-standalone card out of polling.
  enable_polling  boolean NOT NULL DEFAULT true,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT device_device_no_key UNIQUE (device_no),
  CONSTRAINT device_device_no_check CHECK (length(btrim(device_no)) BETWEEN 1 AND 100)
);

CREATE TABLE iot_card (
  id                    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  iccid                 text NOT NULL,
  msisdn                text,
  -- RESTRICT: an account with cards cannot disappear under them.
  carrier_id            bigint NOT NULL REFERENCES carrier_account (id) ON DELETE RESTRICT,
  status                text NOT NULL DEFAULT 'active',
  enable_polling        boolean NOT NULL DEFAULT true,
  -- Standalone cards ignore their device's polling switch.
  is_standalone         boolean NOT NULL DEFAULT true,
  -- Latest observed values; each only moves forward in observed time (out-of-order protection).
  network_status        text,
  network_observed_at   timestamptz,
  realname_status       text,
  realname_observed_at  timestamptz,
  data_usage_kb         bigint,
  data_observed_at      timestamptz,
  created_at            timestamptz NOT NULL DEFAULT now(),
  updated_at            timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT iot_card_iccid_key UNIQUE (iccid),
  -- ICCIDs are 18-22 digits (ITU-T E.118), the last one may be a check letter in some issuers' files.
  CONSTRAINT iot_card_iccid_check CHECK (iccid ~ '^[0-9]{17,21}[0-9A-Fa-f]$'),
  CONSTRAINT iot_card_msisdn_check CHECK (msisdn IS NULL OR msisdn ~ '^\+?[0-9]{5,20}$'),
  CONSTRAINT iot_card_status_check CHECK (status IN ('inventory', 'test', 'active', 'suspended', 'stopped', 'terminated')),
  CONSTRAINT iot_card_data_usage_kb_check CHECK (data_usage_kb IS NULL OR data_usage_kb >= 0)
);
-- Rebuild and per-account listings walk one account's cards in id order.
CREATE INDEX iot_card_carrier_id_idx ON iot_card (carrier_id, id);
CREATE INDEX iot_card_status_idx ON iot_card (status, id);

-- Binding history; the row with unbound_at IS NULL is the card's current device.
CREATE TABLE device_sim_binding (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  device_id   bigint NOT NULL REFERENCES device (id) ON DELETE CASCADE,
  card_id     bigint NOT NULL REFERENCES iot_card (id) ON DELETE CASCADE,
  slot        smallint NOT NULL DEFAULT 1,
  bound_at    timestamptz NOT NULL DEFAULT now(),
  unbound_at  timestamptz,
  CONSTRAINT device_sim_binding_slot_check CHECK (slot BETWEEN 1 AND 16),
  CONSTRAINT device_sim_binding_period_check CHECK (unbound_at IS NULL OR unbound_at >= bound_at)
);
-- A card is in at most one device at a time.
CREATE UNIQUE INDEX device_sim_binding_active_card_key ON device_sim_binding (card_id) WHERE unbound_at IS NULL;
-- "All cards of this device" when its polling switch changes.
CREATE INDEX device_sim_binding_active_device_idx ON device_sim_binding (device_id) WHERE unbound_at IS NULL;

-- The card's plan, evaluated locally by the `package` check (usage %, exhausted, expired).
CREATE TABLE card_package (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  card_id       bigint NOT NULL REFERENCES iot_card (id) ON DELETE CASCADE,
  name          text NOT NULL,
  quota_kb      bigint NOT NULL,
  period_start  timestamptz NOT NULL,
  expires_at    timestamptz,
  active        boolean NOT NULL DEFAULT true,
  created_at    timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT card_package_quota_kb_check CHECK (quota_kb >= 0),
  CONSTRAINT card_package_expiry_check CHECK (expires_at IS NULL OR expires_at > period_start)
);
-- One active plan per card; older plans stay as history.
CREATE UNIQUE INDEX card_package_active_card_key ON card_package (card_id) WHERE active;
