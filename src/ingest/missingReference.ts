/**
 * A record whose write was refused for a reference that is gone (docs/design.md, 'PostgreSQL and
 * records'): a foreign-key violation, or the alert writer's not-found. No retry can land it as it
 * is. Either its card was deleted after the run prepared (nothing of the record can be written), or
 * its account was deleted after the card moved on: then it is written without its alerts (they
 * would belong to the account), so what the check learned stays. Shared by sync ingest (the card
 * worker's activities) and async ingest (the stream's consumer), so both settle it the same way.
 */
import { cardExists } from '../db/cards.js';
import { existingCarrierIds } from '../db/carriers.js';
import { isDomainError } from '../domain/errors.js';
import { isForeignKeyViolation } from './failures.js';
import type { IngestRecord } from './record.js';
import { writeRecords, type RecordWriterDeps } from './writer.js';

/**
 * - `card_deleted`: nothing written; the caller tells it (or keeps it as a dead letter).
 * - `written_without_alerts`: the account is gone, the record is written without its alerts.
 * - `undefined`: not a missing reference, or both still exist: the caller's to throw or retry.
 */
export type MissingReference = 'card_deleted' | 'written_without_alerts' | undefined;

export async function settleMissingReference(writer: RecordWriterDeps, record: IngestRecord, error: unknown): Promise<MissingReference> {
  if (!isForeignKeyViolation(error) && !(isDomainError(error) && error.code === 'not_found')) return undefined;
  if (!(await cardExists(writer.pool, record.cardId))) return 'card_deleted';
  if ((await existingCarrierIds(writer.pool, [record.carrierId])).size > 0) return undefined;
  await writeRecords(writer, [record], { alerts: false });
  return 'written_without_alerts';
}

/** What a log says of a record written without its alerts. */
export const deletedAccountLine = (record: IngestRecord): string =>
  `record ${record.recordId}: account ${record.carrierId} was deleted before the record of card ${record.cardId}; written without its alerts`;
