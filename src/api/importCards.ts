/**
 * Bulk card import. Every row gets its own outcome: valid rows land even when others
 * in the same request are bad, and each bad row is named with its field, value and reason.
 *
 * Rows are first read and checked on their own (shape, the same ICCID twice in the request), then
 * the valid ones are written in batches. A batch is one transaction of a fixed handful of
 * statements whatever its size: references checked for the whole batch, one multi-row INSERT ... ON
 * CONFLICT DO NOTHING RETURNING, and for `onExisting: "update"` one multi-row UPDATE — plus the
 * lifecycle outbox rows of the cards that landed (and of updated cards whose polling changed): a
 * batch is one lifecycle event (docs/design.md, 'Lifecycle'), so a card never lands without what
 * brings it into Redis, whatever fails or dies after the commit (the outbox relay applies the rows).
 * A database failure rolls back its batch whole, cards and outbox rows, so no row of it is
 * half-written; its rows come back in `notLanded` with the reason and the next batches are still
 * tried. Nothing after a commit fails the request: Redis is brought in line by the event itself or
 * by the relay.
 *
 * The answer accounts for every row sent: accepted + updated + skipped + rejected + notLanded.
 * Every row not named in `rejected`, `skipped` or `notLanded` was committed.
 */
import type pg from 'pg';
import { insertCardRows, updateCardsByIccid, type UpdatedCardRow } from '../db/cards.js';
import { existingCarrierIds } from '../db/carriers.js';
import { existingDeviceIds } from '../db/devices.js';
import type { NewCard } from '../domain/card.js';
import { normaliseCard, rejectionOf, updateOf, type CardRow } from '../domain/cardInput.js';
import type { OutboxRef } from '../lifecycle/outboxRows.js';
import type { LifecycleService } from '../lifecycle/service.js';

export const IMPORT_MAX_ROWS = 50_000;
/** Valid rows per transaction: large enough for few round trips, small enough to keep locks and a failed batch short. */
export const IMPORT_BATCH_SIZE = 5_000;

/** What happens to a row whose ICCID is already a card. */
export const ON_EXISTING = ['reject', 'skip', 'update'] as const;
export type OnExisting = (typeof ON_EXISTING)[number];

/** A row that did not land because of its content (rejected) or that was left alone (skipped). */
export interface RowOutcome {
  readonly row: number;
  readonly field: string;
  /** The row's value of that field, when the row has one. */
  readonly value?: unknown;
  readonly reason: string;
}

/** A valid row that did not land because the database failed; sending it again is safe. */
export interface NotLandedRow {
  readonly row: number;
  readonly reason: string;
}

export interface ImportResult {
  /** New cards created. */
  readonly accepted: number;
  readonly rejected: RowOutcome[];
  /** Existing cards brought to the row's values (with `onExisting: "update"`). */
  readonly updated?: number;
  /** Existing cards left as they are (with `onExisting: "skip"`). */
  readonly skipped?: RowOutcome[];
  /** Present when a batch failed in the database. */
  readonly notLanded?: NotLandedRow[];
}

export interface ImportOptions {
  readonly onExisting?: OnExisting;
  readonly batchSize?: number;
}

/** A row that could not even be read (an NDJSON line that is not JSON). */
export class UnreadableRow {
  constructor(readonly reason: string) {}
}

export interface ImportDeps {
  readonly lifecycle: Pick<LifecycleService, 'writeCards'>;
}

/** A row that passed the checks that need no database. */
interface ValidRow {
  readonly row: number;
  readonly input: NewCard;
  readonly card: CardRow;
}

/** What one committed batch did. */
interface BatchOutcome {
  readonly created: OutboxRef[];
  readonly updated: UpdatedCardRow[];
  readonly rejected: RowOutcome[];
  readonly skipped: RowOutcome[];
  readonly notLanded: NotLandedRow[];
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof UnreadableRow);
}

function outcome(row: number, input: unknown, field: string, reason: string): RowOutcome {
  const value = isPlainObject(input) && Object.hasOwn(input, field) ? input[field] : undefined;
  return value === undefined ? { row, field, reason } : { row, field, value, reason };
}

/** Shape checks and duplicates inside the request; no database access. */
function readRows(rows: readonly unknown[]): { valid: ValidRow[]; rejected: RowOutcome[] } {
  const valid: ValidRow[] = [];
  const rejected: RowOutcome[] = [];
  const firstRowOf = new Map<string, number>();
  rows.forEach((input, row) => {
    if (input instanceof UnreadableRow) return void rejected.push({ row, field: 'row', reason: input.reason });
    if (!isPlainObject(input)) return void rejected.push({ row, field: 'row', reason: 'row must be a JSON object' });
    try {
      const card = normaliseCard(input as unknown as NewCard);
      const first = firstRowOf.get(card.iccid);
      if (first !== undefined) return void rejected.push(outcome(row, input, 'iccid', `iccid ${card.iccid} also appears in row ${first}`));
      firstRowOf.set(card.iccid, row);
      valid.push({ row, input: input as unknown as NewCard, card });
    } catch (error) {
      const { field, reason } = rejectionOf(row, error);
      rejected.push(outcome(row, input, field, reason));
    }
  });
  return { valid, rejected };
}

/** Account and device references of a batch, checked in two statements. */
async function referenceProblems(client: pg.PoolClient, batch: readonly ValidRow[]): Promise<Map<number, RowOutcome>> {
  const carriers = await existingCarrierIds(client, [...new Set(batch.map(({ card }) => card.carrierId))]);
  const deviceIds = [...new Set(batch.flatMap(({ card }) => (card.deviceId === null ? [] : [card.deviceId])))];
  const devices = deviceIds.length > 0 ? await existingDeviceIds(client, deviceIds) : new Set<string>();
  const problems = new Map<number, RowOutcome>();
  for (const { row, input, card } of batch) {
    if (!carriers.has(card.carrierId)) problems.set(row, outcome(row, input, 'carrierId', `carrier account ${card.carrierId} does not exist`));
    else if (card.deviceId !== null && !devices.has(card.deviceId))
      problems.set(row, outcome(row, input, 'deviceId', `device ${card.deviceId} does not exist`));
  }
  return problems;
}

/** One transaction: nothing of it is written unless all of it is. */
async function writeBatch(client: pg.PoolClient, batch: readonly ValidRow[], onExisting: OnExisting): Promise<BatchOutcome> {
  const problems = await referenceProblems(client, batch);
  const writable = batch.filter(({ row }) => !problems.has(row));
  const created = await insertCardRows(
    client,
    writable.map(({ card }) => card),
  );
  const existing = writable.filter(({ card }) => !created.has(card.iccid));
  const createdRefs = writable.flatMap(({ card }) => {
    const cardId = created.get(card.iccid);
    return cardId === undefined ? [] : [{ cardId, carrierId: card.carrierId }];
  });
  const result: BatchOutcome = { created: createdRefs, updated: [], rejected: [...problems.values()], skipped: [], notLanded: [] };
  const taken = ({ row, input, card }: ValidRow, what: string): RowOutcome => outcome(row, input, 'iccid', `iccid ${card.iccid} ${what}`);
  if (onExisting === 'reject') result.rejected.push(...existing.map((entry) => taken(entry, 'already exists')));
  if (onExisting === 'skip') result.skipped.push(...existing.map((entry) => taken(entry, 'already exists; left as it is')));
  if (onExisting === 'update' && existing.length > 0) {
    const updated = await updateCardsByIccid(
      client,
      existing.map(({ input, card }) => updateOf(input, card)),
    );
    result.updated.push(...updated);
    const matched = new Set(updated.map((card) => card.iccid));
    // Existed at the insert, gone at the update: deleted by someone else meanwhile.
    for (const { row, card } of existing) {
      if (!matched.has(card.iccid)) result.notLanded.push({ row, reason: `card ${card.iccid} was deleted during the import; send the row again` });
    }
  }
  return result;
}

/**
 * The (card, account) pairs whose Redis keys the batch changes, written as outbox rows with it: new
 * cards, and updated cards whose polling changed — under the old account too when it moved (the
 * apply removes it there before it upserts it under the new one: never in two accounts).
 */
function outboxRefs(result: BatchOutcome): OutboxRef[] {
  const changed = result.updated.filter((card) => card.pollingChanged);
  const moved = changed.filter((card) => card.previousCarrierId !== card.carrierId);
  return [
    ...result.created,
    ...moved.map((card) => ({ cardId: card.id, carrierId: card.previousCarrierId })),
    ...changed.map((card) => ({ cardId: card.id, carrierId: card.carrierId })),
  ];
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Imports up to {@link IMPORT_MAX_ROWS} rows; rows are numbered from 0 in input order. */
export async function importCards(deps: ImportDeps, rows: readonly unknown[], options: ImportOptions = {}): Promise<ImportResult> {
  const onExisting = options.onExisting ?? 'reject';
  const batchSize = options.batchSize ?? IMPORT_BATCH_SIZE;
  const { valid, rejected } = readRows(rows);
  const skipped: RowOutcome[] = [];
  const notLanded: NotLandedRow[] = [];
  let accepted = 0;
  let updated = 0;
  for (let start = 0; start < valid.length; start += batchSize) {
    const batch = valid.slice(start, start + batchSize);
    let result: BatchOutcome;
    try {
      // Cards and their outbox rows in one transaction (one lifecycle event); Redis after the commit.
      result = await deps.lifecycle.writeCards(async (client) => {
        const written = await writeBatch(client, batch, onExisting);
        return { result: written, refs: outboxRefs(written) };
      });
    } catch (error) {
      const span = `${batch[0]!.row}-${batch[batch.length - 1]!.row}`;
      const reason = `the database failed while writing rows ${span} together; none of them was written: ${describe(error)}`;
      notLanded.push(...batch.map(({ row }) => ({ row, reason })));
      continue;
    }
    accepted += result.created.length;
    updated += result.updated.length;
    rejected.push(...result.rejected);
    skipped.push(...result.skipped);
    notLanded.push(...result.notLanded);
  }
  const byRow = (a: { row: number }, b: { row: number }): number => a.row - b.row;
  return {
    accepted,
    rejected: rejected.sort(byRow),
    ...(onExisting === 'update' ? { updated } : {}),
    ...(onExisting === 'skip' ? { skipped: skipped.sort(byRow) } : {}),
    ...(notLanded.length > 0 ? { notLanded: notLanded.sort(byRow) } : {}),
  };
}

/** NDJSON body → rows; blank lines are skipped, a line that is not JSON becomes an {@link UnreadableRow}. */
export function parseNdjson(text: string): unknown[] {
  const rows: unknown[] = [];
  for (const line of text.split('\n')) {
    const trimmed = line.trim();
    if (trimmed === '') continue;
    try {
      rows.push(JSON.parse(trimmed) as unknown);
    } catch (error) {
      rows.push(new UnreadableRow(`line is not JSON: ${error instanceof Error ? error.message : String(error)}`));
    }
  }
  return rows;
}
