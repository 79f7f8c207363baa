-- One row per account at the carrier. The carrier's budget (QPS per rate-limit group) belongs to
-- its gateway account, while every limiter, claim budget and in-flight limit here is keyed by our
-- row (src/redis/keys.ts: all of an account's keys share the `{c<id>}` hash tag so each script runs
-- in one Redis Cluster slot). Two rows on one gateway account would each spend the whole budget;
-- a shared limiter key would have to live outside the rows' slots and make the two rows agree on
-- their group layout. So a second row is refused: the API answers 409 naming `gatewayAccount`
-- (docs/design.md, "Budget and rate limiting").
--
-- Compared as stored, without surrounding blanks (the API stores values trimmed; a row written
-- by hand may not be).
--
-- A database that already has such rows is not changed: the migration stops and names them (id,
-- name, gateway account, enabled) so an operator decides which row keeps the account, e.g. by
-- giving the others the gateway account they really use, or deleting them, then migrates again.
DO $$
DECLARE
  duplicates text;
BEGIN
  SELECT string_agg(format('%L: %s', account, rows), '; ' ORDER BY account)
    INTO duplicates
    FROM (SELECT btrim(gateway_account) AS account,
                 string_agg(format('id %s name %L (%s)', id, name, CASE WHEN enabled THEN 'enabled' ELSE 'disabled' END), ', ' ORDER BY id) AS rows
            FROM carrier_account
           GROUP BY btrim(gateway_account)
          HAVING count(*) > 1) AS shared;
  IF duplicates IS NOT NULL THEN
    RAISE EXCEPTION 'carrier_account rows share a gateway account, which would let each spend the whole carrier budget: %. '
      'Give each gateway account one row (change gateway_account of the others, or delete them), then run the migrations again; nothing was changed.',
      duplicates;
  END IF;
END
$$;

CREATE UNIQUE INDEX carrier_account_gateway_account_key ON carrier_account (btrim(gateway_account));
