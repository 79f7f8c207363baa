/**
 * Priority items: create-or-merge, claim / lease take-over, complete, retryable and final failure,
 * the return of expired claims. Every transition locks the row, changes it and writes an audit
 * record with before/after snapshots in the same transaction, so the trail never misses a step.
 */
import type pg from 'pg';
import { isCheckType, type CheckType } from '../workflow-safe/checkTypes.js';
import { DomainError } from '../domain/errors.js';
import { DEFAULT_ATTEMPT_LIMIT, type PriorityItem, type PriorityRequest } from '../domain/priorityItem.js';
import { requireId, requireInt, requireText } from '../domain/validate.js';
import { writeAudit } from './audit.js';
import { isPgError, mappedExcept } from './errors.js';
import { withTransaction, type Pool } from './pool.js';
import type { Queryable } from './queryable.js';

const COLUMN_NAMES = [
  'status',
  'types',
  'lane',
  'cooldown_ms',
  'confirm_delays_sec',
  'expected',
  'trigger_count',
  'first_actor',
  'first_source',
  'last_actor',
  'last_source',
  'last_triggered_at',
  'attempt_count',
  'attempt_limit',
  'claim_token',
  'claimed_at',
  'started_at',
  'finished_at',
  'next_run_at',
  'result',
  'failure_reason',
  'created_at',
  'updated_at',
] as const;

/** `cooldown_ms` → `cooldownMs`: the PriorityItem field a column is selected as. */
const fieldOf = (column: string): string => column.replace(/_([a-z])/g, (_match, letter: string) => letter.toUpperCase());
type FieldOf<C extends string> = C extends `${infer Head}_${infer Tail}` ? `${Head}${Capitalize<FieldOf<Tail>>}` : C;
/** Compile-time check: every PriorityItem field has its column (does not compile otherwise). */
const _everyFieldSelected: [Exclude<keyof PriorityItem, 'id' | 'cardId' | FieldOf<(typeof COLUMN_NAMES)[number]>>] extends [never] ? true : never = true;

/**
 * Select list of an item, each column named as its PriorityItem field (`cooldown_ms AS
 * "cooldownMs"`) so rows come back as items; optionally qualified by a table alias.
 */
function columns(alias = ''): string {
  const q = alias ? `${alias}.` : '';
  return [`${q}id::text AS id`, `${q}card_id::text AS "cardId"`, ...COLUMN_NAMES.map((name) => `${q}${name} AS "${fieldOf(name)}"`)].join(', ');
}

const COLUMNS = columns();

const ENTITY = 'polling_priority_item';
const WORKER = 'worker';

/** Who performs a worker-side transition; defaults to the worker itself. */
export interface TransitionActor {
  readonly actor?: string;
  readonly source?: string;
}

async function lockActive(client: pg.PoolClient, cardId: string): Promise<PriorityItem | null> {
  const { rows } = await client.query<PriorityItem>(
    `SELECT ${COLUMNS} FROM polling_priority_item WHERE card_id = $1::bigint AND status IN ('pending', 'processing') FOR UPDATE`,
    [cardId],
  );
  return rows[0] ?? null;
}

async function lockById(client: pg.PoolClient, id: string): Promise<PriorityItem | null> {
  const { rows } = await client.query<PriorityItem>(`SELECT ${COLUMNS} FROM polling_priority_item WHERE id = $1::bigint FOR UPDATE`, [id]);
  return rows[0] ?? null;
}

/** UPDATE with fixed SQL text (`sets` are code constants), then the audit record. */
async function transition(
  client: pg.PoolClient,
  before: PriorityItem,
  sets: string,
  params: readonly unknown[],
  audit: { action: string; actor: string; source: string; reason?: string; now: Date },
): Promise<PriorityItem> {
  const { rows } = await client.query<PriorityItem>(`UPDATE polling_priority_item SET ${sets}, updated_at = $2 WHERE id = $1::bigint RETURNING ${COLUMNS}`, [
    before.id,
    audit.now,
    ...params,
  ]);
  const after = rows[0]!;
  await writeAudit(client, {
    entityType: ENTITY,
    entityId: before.id,
    action: audit.action,
    actor: audit.actor,
    source: audit.source,
    before,
    after,
    occurredAt: audit.now,
    ...(audit.reason === undefined ? {} : { reason: audit.reason }),
  });
  return after;
}

function validateRequest(request: PriorityRequest): CheckType[] {
  requireId(request.cardId, 'cardId');
  requireText(request.actor, 'actor');
  requireText(request.source, 'source');
  if (!Array.isArray(request.types) || request.types.length === 0) throw DomainError.invalid('types', 'types must list at least one check type');
  request.types.forEach((type, index) => {
    if (!isCheckType(type)) throw DomainError.invalid(`types[${index}]`, `${String(type)} is not a check type`);
  });
  if (request.lane !== undefined && request.lane !== 'priority' && request.lane !== 'normal')
    throw DomainError.invalid('lane', 'lane must be priority or normal');
  if (request.cooldownMs !== undefined) requireInt(request.cooldownMs, 'cooldownMs', 0, 86_400_000);
  request.confirmDelaysSec?.forEach((delay, index) => requireInt(delay, `confirmDelaysSec[${index}]`, 1, 86_400));
  if (request.attemptLimit !== undefined) requireInt(request.attemptLimit, 'attemptLimit', 1, 100);
  return [...new Set<CheckType>(request.types)];
}

export interface RequestResult {
  readonly item: PriorityItem;
  /** True when the trigger merged into the card's existing active item. */
  readonly merged: boolean;
}

/**
 * Creates the card's active item, or merges into it: trigger count + 1, union of types, latest
 * actor/source, the priority lane if either asked for it, the shorter cooldown. A merge without a
 * cooldown clears a pending retry's `next_run_at`: the caller requests the card in Redis now, which
 * is what the retry was waiting for (left set, the scheduler's sweep would request the item again
 * every few rounds until a run claims it; if the Redis request fails, the caller schedules a retry
 * again). A merge with a cooldown keeps it: Redis may skip that request (types fresh enough), and
 * the retry is then still the item's way to run.
 */
export async function requestPriorityItem(pool: Pool, request: PriorityRequest): Promise<RequestResult> {
  try {
    return await createOrMerge(pool, request);
  } catch (error) {
    // Two first requests of a card at once: the active-item index refused the second creator, whose
    // retry finds the item and merges into it (answered 409 naming the index before: issue 46).
    if (isPgError(error) && error.code === '23505' && error.constraint === ACTIVE_ITEM_INDEX) return createOrMerge(pool, request);
    throw error;
  }
}

/** The partial unique index that keeps one active (pending or processing) item per card. */
const ACTIVE_ITEM_INDEX = 'polling_priority_item_active_card_key';

async function createOrMerge(pool: Pool, request: PriorityRequest): Promise<RequestResult> {
  const types = validateRequest(request);
  const now = request.now ?? new Date();
  return mappedExcept(ACTIVE_ITEM_INDEX, () =>
    withTransaction(pool, async (client) => {
      const card = await client.query('SELECT 1 FROM iot_card WHERE id = $1::bigint', [request.cardId]);
      if (card.rowCount === 0) throw DomainError.notFound('cardId', `card ${request.cardId} does not exist`);
      const active = await lockActive(client, request.cardId);
      const audit = { actor: request.actor, source: request.source, now };
      if (active) {
        const item = await transition(
          client,
          active,
          `trigger_count = trigger_count + 1,
           types = ARRAY(SELECT DISTINCT unnest(types || $3::text[]) ORDER BY 1),
           lane = CASE WHEN lane = 'priority' OR $4 = 'priority' THEN 'priority' ELSE 'normal' END,
           cooldown_ms = LEAST(cooldown_ms, coalesce($5, cooldown_ms)),
           confirm_delays_sec = coalesce($6::integer[], confirm_delays_sec),
           expected = coalesce($7, expected),
           last_actor = $8, last_source = $9, last_triggered_at = $2,
           next_run_at = CASE WHEN coalesce($5, 0) = 0 THEN NULL ELSE next_run_at END`,
          [
            types,
            request.lane ?? 'priority',
            request.cooldownMs ?? null,
            request.confirmDelaysSec ?? null,
            request.expected ?? null,
            request.actor,
            request.source,
          ],
          { ...audit, action: 'merged' },
        );
        return { item, merged: true };
      }
      // The partial unique index makes a concurrent creator fail here; the caller may retry and merge.
      const { rows } = await client.query<PriorityItem>(
        `INSERT INTO polling_priority_item (card_id, types, lane, cooldown_ms, confirm_delays_sec, expected, first_actor, first_source,
           last_actor, last_source, last_triggered_at, attempt_limit, created_at, updated_at)
         VALUES ($1::bigint, $2::text[], $3, $4, $5::integer[], $6, $7, $8, $7, $8, $9, $10, $9, $9)
         RETURNING ${COLUMNS}`,
        [
          request.cardId,
          [...types].sort(),
          request.lane ?? 'priority',
          request.cooldownMs ?? 0,
          request.confirmDelaysSec ?? [],
          request.expected ?? null,
          request.actor,
          request.source,
          now,
          request.attemptLimit ?? DEFAULT_ATTEMPT_LIMIT,
        ],
      );
      const item = rows[0]!;
      await writeAudit(client, { entityType: ENTITY, entityId: item.id, action: 'created', ...audit, occurredAt: now, before: null, after: item });
      return { item, merged: false };
    }),
  );
}

export interface ClaimInput extends TransitionActor {
  readonly cardId: string;
  /** The execution's claim token (from the Redis claim); completing or failing must present it. */
  readonly token: string;
  /** How long a processing claim protects the item from take-over. */
  readonly leaseMs: number;
  readonly now?: Date;
}

export type ClaimResult =
  | { readonly status: 'claimed' | 'taken_over'; readonly item: PriorityItem }
  /** No active item: a normal execution. */
  | { readonly status: 'none' }
  /** Another execution holds an unexpired claim: do not call the gateway for the item. */
  | { readonly status: 'busy'; readonly item: PriorityItem }
  /** A crashed claim used the last attempt: the item was failed instead of taken over. */
  | { readonly status: 'exhausted'; readonly item: PriorityItem };

/**
 * pending → processing (attempt + 1), or take-over of a processing item whose lease expired.
 * Claiming is the start of an attempt: the attempt counter moves here, so a crash mid-call
 * still counts against the limit.
 */
export async function claimPriorityItem(pool: Pool, input: ClaimInput): Promise<ClaimResult> {
  requireId(input.cardId, 'cardId');
  requireText(input.token, 'token');
  requireInt(input.leaseMs, 'leaseMs', 1, 86_400_000);
  const now = input.now ?? new Date();
  const audit = { actor: input.actor ?? WORKER, source: input.source ?? WORKER, now };
  return withTransaction(pool, async (client): Promise<ClaimResult> => {
    const item = await lockActive(client, input.cardId);
    if (!item) return { status: 'none' };
    const claimSets = `status = 'processing', claim_token = $3, claimed_at = $2, started_at = $2, attempt_count = attempt_count + 1,
      finished_at = NULL, next_run_at = NULL`;
    if (item.status === 'pending') {
      return { status: 'claimed', item: await transition(client, item, claimSets, [input.token], { ...audit, action: 'claimed' }) };
    }
    if (item.claimToken === input.token) return { status: 'claimed', item }; // a retried claim of the same execution
    const expired = item.claimedAt === null || item.claimedAt.getTime() + input.leaseMs <= now.getTime();
    if (!expired) return { status: 'busy', item };
    if (item.attemptCount >= item.attemptLimit) {
      const failed = await transition(
        client,
        item,
        `status = 'failed', result = 'failed', failure_reason = $3, finished_at = $2, claim_token = NULL, next_run_at = NULL`,
        ['claim lease expired on the last attempt'],
        { ...audit, action: 'failed', reason: 'claim lease expired on the last attempt' },
      );
      return { status: 'exhausted', item: failed };
    }
    return {
      status: 'taken_over',
      item: await transition(client, item, claimSets, [input.token], { ...audit, action: 'taken_over', reason: 'claim lease expired' }),
    };
  });
}

export interface FinishInput extends TransitionActor {
  readonly itemId: string;
  /** Must match the claim; a stale executor (its item taken over) changes nothing. */
  readonly token: string;
  readonly now?: Date;
}

/** processing → completed. Returns null when the token no longer owns the item. */
export async function completePriorityItem(pool: Pool, input: FinishInput): Promise<PriorityItem | null> {
  return finish(pool, input, (item, client, audit) =>
    transition(client, item, `status = 'completed', result = 'success', failure_reason = NULL, finished_at = $2, claim_token = NULL`, [], {
      ...audit,
      action: 'completed',
    }),
  );
}

export interface FailInput extends FinishInput {
  readonly reason: string;
  /**
   * Retryable (gateway timeout, transient error): back to pending with `nextRunAt` until the
   * attempt limit, then failed. Not retryable (business failure: card gone, not polled, capability
   * not configured): failed at once.
   */
  readonly retryable: boolean;
  readonly nextRunAt?: Date;
}

/** Fails an attempt; see {@link FailInput.retryable}. Returns null when the token no longer owns the item. */
export async function failPriorityItem(pool: Pool, input: FailInput): Promise<PriorityItem | null> {
  const reason = requireText(input.reason, 'reason', 1000);
  return finish(pool, input, (item, client, audit) => {
    if (input.retryable && item.attemptCount < item.attemptLimit) {
      const nextRunAt = input.nextRunAt ?? audit.now;
      return transition(
        client,
        item,
        `status = 'pending', result = 'failed', failure_reason = $3, finished_at = $2, next_run_at = $4, claim_token = NULL, claimed_at = NULL`,
        [reason, nextRunAt],
        { ...audit, action: 'retry_scheduled', reason },
      );
    }
    const why = input.retryable ? `attempt limit reached: ${reason}` : reason;
    return transition(
      client,
      item,
      `status = 'failed', result = 'failed', failure_reason = $3, finished_at = $2, claim_token = NULL, next_run_at = NULL`,
      [why],
      {
        ...audit,
        action: 'failed',
        reason: why,
      },
    );
  });
}

async function finish(
  pool: Pool,
  input: FinishInput,
  apply: (item: PriorityItem, client: pg.PoolClient, audit: { actor: string; source: string; now: Date }) => Promise<PriorityItem>,
): Promise<PriorityItem | null> {
  requireId(input.itemId, 'itemId');
  requireText(input.token, 'token');
  const audit = { actor: input.actor ?? WORKER, source: input.source ?? WORKER, now: input.now ?? new Date() };
  return withTransaction(pool, async (client) => {
    const item = await lockById(client, input.itemId);
    if (!item) throw DomainError.notFound('itemId', `priority item ${input.itemId} does not exist`);
    if (item.status !== 'processing' || item.claimToken !== input.token) return null;
    return apply(item, client, audit);
  });
}

/**
 * Fails a pending item without an execution (e.g. a rebuild finds the card no longer polled).
 * Returns null when the item is not pending any more.
 */
export async function failPendingPriorityItem(
  pool: Pool,
  input: TransitionActor & { itemId: string; reason: string; now?: Date },
): Promise<PriorityItem | null> {
  requireId(input.itemId, 'itemId');
  const reason = requireText(input.reason, 'reason', 1000);
  const now = input.now ?? new Date();
  return withTransaction(pool, async (client) => {
    const item = await lockById(client, input.itemId);
    if (!item || item.status !== 'pending') return null;
    return transition(client, item, `status = 'failed', result = 'failed', failure_reason = $3, finished_at = $2, next_run_at = NULL`, [reason], {
      actor: input.actor ?? WORKER,
      source: input.source ?? WORKER,
      now,
      action: 'failed',
      reason,
    });
  });
}

export async function findActivePriorityItem(db: Queryable, cardId: string): Promise<PriorityItem | null> {
  const { rows } = await db.query<PriorityItem>(
    `SELECT ${COLUMNS} FROM polling_priority_item WHERE card_id = $1::bigint AND status IN ('pending', 'processing')`,
    [requireId(cardId, 'cardId')],
  );
  return rows[0] ?? null;
}

/** Pending items of one account's cards (rebuild re-requests them), keyset-paginated by item id. */
export async function listPendingPriorityItems(
  db: Queryable,
  carrierId: string,
  afterId = '0',
  limit = 1000,
): Promise<(PriorityItem & { carrierId: string })[]> {
  const { rows } = await db.query<PriorityItem & { carrierId: string }>(
    `SELECT ${columns('i')}, c.carrier_id::text AS "carrierId"
       FROM polling_priority_item i JOIN iot_card c ON c.id = i.card_id
      WHERE i.status = 'pending' AND c.carrier_id = $1::bigint AND i.id > $2::bigint ORDER BY i.id LIMIT $3`,
    [requireId(carrierId, 'carrierId'), afterId, limit],
  );
  return rows;
}

/**
 * When a processing item's claim has expired: its claim time plus the lease of the card's account,
 * the same bound a claim's take-over applies (`claimPriorityItem` is given the account's lease by
 * the card run). A run holds the item from its preparation to its record, and its steps end within
 * the account's total timeout, which never exceeds the lease (carrier_account's check): past it, the
 * run has died or waits for its finish or record (docs/design.md, 'Request-check and priority items').
 */
const CLAIM_EXPIRES_AT = `i.claimed_at + a.lease_ms * interval '1 millisecond'`;

/** One account's items with their card and the account's lease (`a`) beside them. */
const ACCOUNT_ITEMS = `polling_priority_item i JOIN iot_card c ON c.id = i.card_id JOIN carrier_account a ON a.id = c.carrier_id`;

/**
 * The sweeper of stranded claims: processing items of one account whose claim expired go back to
 * pending with a retry due at once, audited as `lease_expired` (failed instead on their last
 * attempt, as a take-over would). An execution that died after claiming its item — a killed card
 * worker, a run that threw before its record, a batch card whose record flush failed — finishes it
 * never, and its Redis request is spent, so no later run of the card claims it: without this it
 * stayed processing for ever. The dead executor's late transitions change nothing (token-guarded);
 * a slow one that is still alive only sees its item checked once more. Rows another transaction
 * holds are skipped (the next sweep sees them). Returns the items it moved.
 */
export async function returnExpiredPriorityItems(
  pool: Pool,
  carrierId: string,
  options: TransitionActor & { limit?: number; now?: Date } = {},
): Promise<PriorityItem[]> {
  requireId(carrierId, 'carrierId');
  const now = options.now ?? new Date();
  const audit = { actor: options.actor ?? WORKER, source: options.source ?? WORKER, now };
  return withTransaction(pool, async (client) => {
    const { rows } = await client.query<PriorityItem>(
      `SELECT ${columns('i')} FROM ${ACCOUNT_ITEMS}
        WHERE i.status = 'processing' AND c.carrier_id = $1::bigint AND ${CLAIM_EXPIRES_AT} <= $2
        ORDER BY i.claimed_at LIMIT $3 FOR UPDATE OF i SKIP LOCKED`,
      [carrierId, now, options.limit ?? 500],
    );
    const moved: PriorityItem[] = [];
    for (const item of rows) moved.push(await returnExpired(client, item, audit));
    return moved;
  });
}

/** Whether any processing item of the account has an expired claim (no lock taken). */
async function hasExpiredClaims(pool: Pool, carrierId: string): Promise<boolean> {
  const { rows } = await pool.query(
    `SELECT 1 FROM ${ACCOUNT_ITEMS} WHERE i.status = 'processing' AND c.carrier_id = $1::bigint AND ${CLAIM_EXPIRES_AT} <= now() LIMIT 1`,
    [carrierId],
  );
  return rows.length > 0;
}

/** One expired processing item back to pending and due, or failed when that was its last attempt. */
function returnExpired(client: pg.PoolClient, item: PriorityItem, audit: { actor: string; source: string; now: Date }): Promise<PriorityItem> {
  if (item.attemptCount >= item.attemptLimit) {
    const reason = 'claim lease expired on the last attempt';
    return transition(
      client,
      item,
      `status = 'failed', result = 'failed', failure_reason = $3, finished_at = $2, claim_token = NULL, next_run_at = NULL`,
      [reason],
      {
        ...audit,
        action: 'failed',
        reason,
      },
    );
  }
  const reason = 'claim lease expired';
  return transition(
    client,
    item,
    `status = 'pending', result = 'failed', failure_reason = $3, finished_at = $2, next_run_at = $2, claim_token = NULL, claimed_at = NULL`,
    [reason],
    { ...audit, action: 'lease_expired', reason },
  );
}

/**
 * Pending items of one account whose retry is due (`next_run_at` ≤ now): the scheduler requests
 * them again. Expired processing items are returned to pending first, so they are among them.
 */
export async function listDuePriorityRetries(pool: Pool, carrierId: string, limit = 500): Promise<PriorityItem[]> {
  // A plain read first: the sweep runs every few claim rounds of every account, and a transaction
  // each time (almost always for nothing) cost a BEGIN and COMMIT per account per sweep.
  if (await hasExpiredClaims(pool, carrierId)) await returnExpiredPriorityItems(pool, carrierId, { limit });
  const { rows } = await pool.query<PriorityItem>(
    `SELECT ${columns('i')}
       FROM polling_priority_item i JOIN iot_card c ON c.id = i.card_id
      WHERE i.status = 'pending' AND i.next_run_at <= now() AND c.carrier_id = $1::bigint ORDER BY i.next_run_at LIMIT $2`,
    [requireId(carrierId, 'carrierId'), limit],
  );
  return rows;
}

/**
 * Milliseconds until the account's next pending priority retry is due, or its next processing
 * item's claim expires (the sweep returns it then); ≤ 0: due now; null when neither waits.
 */
export async function nextPriorityRetryInMs(db: Queryable, carrierId: string): Promise<number | null> {
  const { rows } = await db.query<{ in_ms: string | null }>(
    `SELECT floor(extract(epoch FROM (min(d.at) - now())) * 1000)::text AS in_ms
       FROM (SELECT i.next_run_at AS at FROM polling_priority_item i JOIN iot_card c ON c.id = i.card_id
              WHERE i.status = 'pending' AND i.next_run_at IS NOT NULL AND c.carrier_id = $1::bigint
             UNION ALL
             SELECT ${CLAIM_EXPIRES_AT} FROM ${ACCOUNT_ITEMS} WHERE i.status = 'processing' AND c.carrier_id = $1::bigint) d`,
    [requireId(carrierId, 'carrierId')],
  );
  const raw = rows[0]?.in_ms;
  return raw === null || raw === undefined ? null : Number(raw);
}

/** A pending item whose Redis request did not land gets a next run (the scheduler requests it again then). */
export async function schedulePriorityRetry(db: Queryable, itemId: string, nextRunAt: Date): Promise<void> {
  await db.query(`UPDATE polling_priority_item SET next_run_at = $2, updated_at = now() WHERE id = $1::bigint AND status = 'pending' AND next_run_at IS NULL`, [
    requireId(itemId, 'itemId'),
    nextRunAt,
  ]);
}
