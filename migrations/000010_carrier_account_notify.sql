-- Every change that can give an account a scheduler (a new account, one enabled or disabled, one
-- deleted) is announced on the channel `card_poller_carrier_account`, whatever made it: the API,
-- the lifecycle service, an import, a row written by hand. The control worker listens and asks
-- pollingControl for a reconcile (docs/design.md, "pollingControl").
--
-- The payload is the schema the table lives in: deployments or test stacks sharing one database
-- each listen on the same channel and keep only their own schema's notifications. A statement
-- announces once however many rows it touched, and PostgreSQL folds identical notifications of
-- one transaction into one, so a bulk import costs one notification.
CREATE FUNCTION carrier_account_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('card_poller_carrier_account', TG_TABLE_SCHEMA);
  RETURN NULL;
END
$$;

-- Other columns do not decide whether a scheduler runs: their changes reach the running
-- scheduler through its configChanged signal and its own re-reads.
CREATE TRIGGER carrier_account_notify
AFTER INSERT OR DELETE OR UPDATE OF enabled ON carrier_account
FOR EACH STATEMENT EXECUTE FUNCTION carrier_account_notify();
