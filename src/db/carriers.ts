/** Carrier accounts with their rate-limit groups and type → group map. */
import type pg from 'pg';
import type { GatewayCheckType } from '../workflow-safe/checkTypes.js';
import type { Carrier, CarrierPatch, NewCarrier, RateLimitGroup } from '../domain/carrier.js';
import { validateCarrierScalars, validateGroups, validateTypeGroups } from '../domain/carrierInput.js';
import { DomainError } from '../domain/errors.js';
import { requireId, requireText } from '../domain/validate.js';
import { mapped } from './errors.js';
import { withTransaction } from './pool.js';
import type { Queryable } from './queryable.js';

interface CarrierRow {
  id: string;
  name: string;
  gateway_account: string;
  enabled: boolean;
  inflight_limit: number;
  priority_ratio: string;
  lease_ms: number;
  step_timeout_ms: number;
  total_timeout_ms: number;
  realname_control: boolean;
  backoff_base_ms: number;
  failure_alert_threshold: number;
  account_alert_threshold: number;
  account_alert_window_ms: number;
  groups: { name: string; qps: number }[];
  type_groups: Partial<Record<GatewayCheckType, string>>;
  event_secret_set: boolean;
}

const SELECT_CARRIER = `
  SELECT a.id::text, a.name, a.gateway_account, a.enabled, a.inflight_limit, a.priority_ratio, a.lease_ms,
         a.step_timeout_ms, a.total_timeout_ms, a.realname_control, a.backoff_base_ms, a.failure_alert_threshold,
         a.account_alert_threshold, a.account_alert_window_ms, a.event_secret IS NOT NULL AS event_secret_set,
         coalesce((SELECT json_agg(json_build_object('name', g.name, 'qps', g.qps) ORDER BY g.name)
                     FROM rate_limit_group g WHERE g.carrier_id = a.id), '[]'::json) AS groups,
         coalesce((SELECT json_object_agg(t.check_type, t.group_name)
                     FROM check_type_group t WHERE t.carrier_id = a.id), '{}'::json) AS type_groups
    FROM carrier_account a`;

function toCarrier(row: CarrierRow): Carrier {
  return {
    id: row.id,
    name: row.name,
    gatewayAccount: row.gateway_account,
    enabled: row.enabled,
    inflightLimit: row.inflight_limit,
    priorityRatio: Number(row.priority_ratio),
    leaseMs: row.lease_ms,
    stepTimeoutMs: row.step_timeout_ms,
    totalTimeoutMs: row.total_timeout_ms,
    realnameControl: row.realname_control,
    backoffBaseMs: row.backoff_base_ms,
    failureAlertThreshold: row.failure_alert_threshold,
    accountAlertThreshold: row.account_alert_threshold,
    accountAlertWindowMs: row.account_alert_window_ms,
    groups: row.groups.map((group) => ({ name: group.name, qps: Number(group.qps) })),
    typeGroups: row.type_groups,
    eventSecretSet: row.event_secret_set,
  };
}

/** Scalar input field → column. Order matters only for building the statement. */
const COLUMNS = {
  name: 'name',
  gatewayAccount: 'gateway_account',
  enabled: 'enabled',
  inflightLimit: 'inflight_limit',
  priorityRatio: 'priority_ratio',
  leaseMs: 'lease_ms',
  stepTimeoutMs: 'step_timeout_ms',
  totalTimeoutMs: 'total_timeout_ms',
  realnameControl: 'realname_control',
  backoffBaseMs: 'backoff_base_ms',
  failureAlertThreshold: 'failure_alert_threshold',
  accountAlertThreshold: 'account_alert_threshold',
  accountAlertWindowMs: 'account_alert_window_ms',
  eventSecret: 'event_secret',
} as const satisfies Record<string, string>;

type ScalarField = keyof typeof COLUMNS;

/** Present scalar fields as (column, value) pairs; column names come from the fixed map above. */
function scalarAssignments(input: CarrierPatch): { columns: string[]; values: unknown[] } {
  const columns: string[] = [];
  const values: unknown[] = [];
  for (const field of Object.keys(COLUMNS) as ScalarField[]) {
    const value = input[field];
    if (value === undefined) continue;
    columns.push(COLUMNS[field]);
    // A secret is taken as given: a space in it is part of what the carrier signs with.
    values.push(typeof value === 'string' && field !== 'eventSecret' ? value.trim() : value);
  }
  return { columns, values };
}

async function replaceGroups(client: pg.PoolClient, carrierId: string, groups: readonly RateLimitGroup[]): Promise<void> {
  // Delete only dropped groups so mappings to surviving groups are kept (FK cascades the rest).
  await client.query('DELETE FROM rate_limit_group WHERE carrier_id = $1::bigint AND NOT (name = ANY($2::text[]))', [
    carrierId,
    groups.map((group) => group.name),
  ]);
  await client.query(
    `INSERT INTO rate_limit_group (carrier_id, name, qps)
     SELECT $1::bigint, g.name, g.qps FROM unnest($2::text[], $3::numeric[]) AS g(name, qps)
     ON CONFLICT (carrier_id, name) DO UPDATE SET qps = excluded.qps`,
    [carrierId, groups.map((group) => group.name), groups.map((group) => group.qps)],
  );
}

async function replaceTypeGroups(client: pg.PoolClient, carrierId: string, typeGroups: Partial<Record<GatewayCheckType, string>>): Promise<void> {
  const entries = Object.entries(typeGroups);
  await client.query('DELETE FROM check_type_group WHERE carrier_id = $1::bigint', [carrierId]);
  await client.query(
    `INSERT INTO check_type_group (carrier_id, check_type, group_name)
     SELECT $1::bigint, t.check_type, t.group_name FROM unnest($2::text[], $3::text[]) AS t(check_type, group_name)`,
    [carrierId, entries.map(([type]) => type), entries.map(([, group]) => group)],
  );
}

export async function findCarrier(db: Queryable, id: string): Promise<Carrier | null> {
  const { rows } = await db.query<CarrierRow>(`${SELECT_CARRIER} WHERE a.id = $1::bigint`, [requireId(id, 'carrierId')]);
  return rows[0] ? toCarrier(rows[0]) : null;
}

export async function getCarrier(db: Queryable, id: string): Promise<Carrier> {
  const carrier = await findCarrier(db, id);
  if (!carrier) throw DomainError.notFound('carrierId', `carrier account ${id} does not exist`);
  return carrier;
}

export async function listCarriers(db: Queryable, options: { enabledOnly?: boolean } = {}): Promise<Carrier[]> {
  const { rows } = await db.query<CarrierRow>(`${SELECT_CARRIER} WHERE ($1::boolean IS NOT TRUE OR a.enabled) ORDER BY a.id`, [options.enabledOnly ?? false]);
  return rows.map(toCarrier);
}

/** Accounts among `ids` that exist (batch validation). */
export async function existingCarrierIds(db: Queryable, ids: readonly string[]): Promise<Set<string>> {
  const { rows } = await db.query<{ id: string }>('SELECT id::text FROM carrier_account WHERE id = ANY($1::bigint[])', [ids]);
  return new Set(rows.map((row) => row.id));
}

/** The unique index of migration 000013: one row per gateway account. */
const GATEWAY_ACCOUNT_KEY = 'carrier_account_gateway_account_key';

/**
 * One row per gateway account (the unique index of migration 000013). The carrier's budget belongs
 * to its gateway account, while limiters, claim budgets and in-flight limits are per row (their
 * Redis keys carry the row's hash tag, so one script touches one Redis Cluster slot): a second row
 * would spend the whole budget again. A refused write names the row that has the account.
 */
async function mappedCarrierWrite<T>(pool: pg.Pool, gatewayAccount: string | undefined, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    const { code, constraint } = (typeof error === 'object' && error !== null ? error : {}) as { code?: unknown; constraint?: unknown };
    if (code !== '23505' || constraint !== GATEWAY_ACCOUNT_KEY || gatewayAccount === undefined) throw error;
    const { rows } = await pool
      .query<{ id: string; name: string }>('SELECT id::text, name FROM carrier_account WHERE btrim(gateway_account) = btrim($1) ORDER BY id LIMIT 1', [
        gatewayAccount,
      ])
      .catch(() => ({ rows: [] }));
    const holder = rows[0] ? `carrier account ${rows[0].id} (${JSON.stringify(rows[0].name)})` : 'another carrier account';
    throw DomainError.conflict(
      'gatewayAccount',
      `gatewayAccount ${JSON.stringify(gatewayAccount.trim())} already belongs to ${holder}: one carrier account per gateway account, whose budget it spends`,
    );
  }
}

/** Creates the account, its groups and type map in one transaction. */
export async function createCarrier(pool: pg.Pool, input: NewCarrier): Promise<Carrier> {
  requireText(input.name, 'name');
  requireText(input.gatewayAccount, 'gatewayAccount');
  validateCarrierScalars(input);
  const groups = validateGroups(input.groups ?? []);
  const typeGroups = validateTypeGroups(input.typeGroups ?? {}, new Set(groups.map((group) => group.name)));
  return mapped(() =>
    mappedCarrierWrite(pool, input.gatewayAccount, () =>
      withTransaction(pool, async (client) => {
        const { columns, values } = scalarAssignments(input);
        const placeholders = values.map((_, index) => `$${index + 1}`);
        const { rows } = await client.query<{ id: string }>(
          `INSERT INTO carrier_account (${columns.join(', ')}) VALUES (${placeholders.join(', ')}) RETURNING id::text`,
          values,
        );
        const id = rows[0]!.id;
        await replaceGroups(client, id, groups);
        await replaceTypeGroups(client, id, typeGroups);
        return getCarrier(client, id);
      }),
    ),
  );
}

/** Applies a patch in one transaction; `groups` / `typeGroups` replace the whole set when given. */
export async function updateCarrier(pool: pg.Pool, id: string, patch: CarrierPatch): Promise<Carrier> {
  requireId(id, 'id');
  validateCarrierScalars(patch);
  const groups = patch.groups === undefined ? undefined : validateGroups(patch.groups);
  return mapped(() =>
    mappedCarrierWrite(pool, patch.gatewayAccount, () =>
      withTransaction(pool, async (client) => {
        // Lock the account so concurrent patches of groups and map apply one after the other.
        const locked = await client.query('SELECT 1 FROM carrier_account WHERE id = $1::bigint FOR UPDATE', [id]);
        if (locked.rowCount === 0) throw DomainError.notFound('id', `carrier account ${id} does not exist`);
        const { columns, values } = scalarAssignments(patch);
        if (columns.length > 0) {
          const sets = columns.map((column, index) => `${column} = $${index + 2}`);
          await client.query(`UPDATE carrier_account SET ${sets.join(', ')}, updated_at = now() WHERE id = $1::bigint`, [id, ...values]);
        }
        if (groups) await replaceGroups(client, id, groups);
        if (patch.typeGroups !== undefined) {
          const names = groups ?? (await getCarrier(client, id)).groups;
          await replaceTypeGroups(client, id, validateTypeGroups(patch.typeGroups, new Set(names.map((group) => group.name))));
        }
        return getCarrier(client, id);
      }),
    ),
  );
}
