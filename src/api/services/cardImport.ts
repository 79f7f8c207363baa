/**
 * Bulk card import (DESIGN §10, issue 7). Rows are taken in chunks; each chunk is all or nothing:
 * validated as a whole (shape, ICCID taken, unknown account or device), inserted in one
 * transaction, then brought into Redis with one lifecycle batch (one pipeline). A chunk with a bad
 * row is rejected whole — the bad rows with their own field and reason, the others with a reason
 * naming the rows that sank the chunk — and the remaining chunks still land. So
 * `accepted + rejected.length` always equals the number of rows sent, and a caller can fix the named
 * rows and resend exactly the rejected ones.
 */
import type pg from 'pg';
import { existingIccids, insertCards } from '../../db/cards.js';
import { existingCarrierIds } from '../../db/carriers.js';
import { existingDeviceIds } from '../../db/devices.js';
import { withTransaction } from '../../db/pool.js';
import type { NewCard } from '../../domain/card.js';
import { normaliseCard, rejectionOf, type CardRow } from '../../domain/cardInput.js';
import type { LifecycleService } from '../../lifecycle/service.js';

export const IMPORT_MAX_ROWS = 50_000;
/** Rows per transaction: large enough for few round trips, small enough to keep locks and a bad-row loss short. */
export const IMPORT_CHUNK_SIZE = 5_000;

export interface ImportRejection {
  readonly row: number;
  readonly field: string;
  readonly reason: string;
}

export interface ImportResult {
  readonly accepted: number;
  readonly rejected: ImportRejection[];
}

/** A row that could not even be read (an NDJSON line that is not JSON). */
export class UnreadableRow {
  constructor(readonly reason: string) {}
}

interface ImportDeps {
  readonly pool: pg.Pool;
  readonly lifecycle: LifecycleService;
}

/** Thrown inside the chunk's transaction to roll it back with the rows at fault. */
class ChunkRejected extends Error {
  constructor(readonly rows: ImportRejection[]) {
    super('chunk rejected');
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof UnreadableRow);
}

/** Shape checks and duplicates inside the chunk; no database access. */
function normaliseChunk(rows: readonly unknown[], offset: number): { cards: CardRow[]; problems: ImportRejection[] } {
  const cards: CardRow[] = [];
  const problems: ImportRejection[] = [];
  const firstRowOf = new Map<string, number>();
  rows.forEach((input, index) => {
    const row = offset + index;
    if (input instanceof UnreadableRow) return void problems.push({ row, field: 'row', reason: input.reason });
    if (!isPlainObject(input)) return void problems.push({ row, field: 'row', reason: 'row must be a JSON object' });
    try {
      const card = normaliseCard(input as unknown as NewCard);
      const first = firstRowOf.get(card.iccid);
      if (first !== undefined) return void problems.push({ row, field: 'iccid', reason: `iccid ${card.iccid} also appears in row ${first}` });
      firstRowOf.set(card.iccid, row);
      cards.push(card);
    } catch (error) {
      const { field, reason } = rejectionOf(row, error);
      problems.push({ row, field, reason });
    }
  });
  return { cards, problems };
}

/** References checked for the whole chunk in three statements, inside its transaction. */
async function referenceProblems(client: pg.PoolClient, cards: readonly CardRow[], offset: number): Promise<ImportRejection[]> {
  const taken = await existingIccids(client, cards.map((card) => card.iccid));
  const carriers = await existingCarrierIds(client, [...new Set(cards.map((card) => card.carrierId))]);
  const deviceIds = [...new Set(cards.flatMap((card) => (card.deviceId === null ? [] : [card.deviceId])))];
  const devices = deviceIds.length > 0 ? await existingDeviceIds(client, deviceIds) : new Set<string>();
  const problems: ImportRejection[] = [];
  cards.forEach((card, index) => {
    const row = offset + index;
    if (taken.has(card.iccid)) problems.push({ row, field: 'iccid', reason: `iccid ${card.iccid} already exists` });
    else if (!carriers.has(card.carrierId)) problems.push({ row, field: 'carrierId', reason: `carrier account ${card.carrierId} does not exist` });
    else if (card.deviceId !== null && !devices.has(card.deviceId)) problems.push({ row, field: 'deviceId', reason: `device ${card.deviceId} does not exist` });
  });
  return problems;
}

/** The rest of a sunk chunk: each row gets a reason so the answer accounts for every row sent. */
function sunkRows(offset: number, size: number, problems: readonly ImportRejection[]): ImportRejection[] {
  const bad = new Set(problems.map((problem) => problem.row));
  const named = [...bad].slice(0, 5).join(', ') + (bad.size > 5 ? ` and ${bad.size - 5} more` : '');
  const reason = `not imported: rows ${offset}-${offset + size - 1} are imported together and row(s) ${named} were rejected`;
  const rest: ImportRejection[] = [];
  for (let row = offset; row < offset + size; row += 1) if (!bad.has(row)) rest.push({ row, field: 'row', reason });
  return rest;
}

async function importChunk(deps: ImportDeps, rows: readonly unknown[], offset: number): Promise<ImportRejection[]> {
  const { cards, problems } = normaliseChunk(rows, offset);
  if (problems.length > 0) return [...problems, ...sunkRows(offset, rows.length, problems)];
  try {
    const ids = await withTransaction(deps.pool, async (client) => {
      const missing = await referenceProblems(client, cards, offset);
      if (missing.length > 0) throw new ChunkRejected(missing);
      const inserted = await insertCards(client, cards);
      if (inserted.length !== cards.length) {
        // Someone inserted one of these ICCIDs between our check and the insert (ON CONFLICT skipped it).
        const landed = new Set(inserted.map((card) => card.iccid));
        throw new ChunkRejected(cards.flatMap((card, index) => (landed.has(card.iccid) ? [] : [{ row: offset + index, field: 'iccid', reason: `iccid ${card.iccid} already exists` }])));
      }
      return inserted.map((card) => card.id);
    });
    // Committed: one lifecycle batch puts the polled cards into their lanes (one Redis pipeline).
    await deps.lifecycle.resync(ids);
    return [];
  } catch (error) {
    if (error instanceof ChunkRejected) return [...error.rows, ...sunkRows(offset, rows.length, error.rows)];
    throw error;
  }
}

/** Imports up to {@link IMPORT_MAX_ROWS} rows chunk by chunk; rows are numbered from 0 in input order. */
export async function importCards(deps: ImportDeps, rows: readonly unknown[], chunkSize = IMPORT_CHUNK_SIZE): Promise<ImportResult> {
  const rejected: ImportRejection[] = [];
  let accepted = 0;
  for (let offset = 0; offset < rows.length; offset += chunkSize) {
    const chunk = rows.slice(offset, offset + chunkSize);
    const problems = await importChunk(deps, chunk, offset);
    if (problems.length === 0) accepted += chunk.length;
    rejected.push(...problems);
  }
  rejected.sort((a, b) => a.row - b.row);
  return { accepted, rejected };
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
