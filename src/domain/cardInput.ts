/** Validation of card input; per-row problems become rejections naming the field. */
import { isCardStatus, type CardStatus, type NewCard } from './card.js';
import { DomainError, type DomainErrorCode } from './errors.js';
import { requireId } from './validate.js';

const ICCID = /^[0-9]{17,21}[0-9A-Fa-f]$/;
const MSISDN = /^\+?[0-9]{5,20}$/;

/** A valid, normalised new card: every default filled in. */
export interface CardRow {
  readonly iccid: string;
  readonly msisdn: string | null;
  readonly carrierId: string;
  readonly status: CardStatus;
  readonly enablePolling: boolean;
  readonly deviceId: string | null;
  readonly standalone: boolean;
}

/**
 * What an update of an existing card changes: the fields the row gave. A row that leaves out a
 * field keeps the card's value (a re-sent file must not reset a status changed since), where a
 * new card takes the defaults. `null` for msisdn or deviceId clears it.
 */
export interface CardUpdateRow {
  readonly iccid: string;
  readonly carrierId: string;
  readonly msisdn?: string | null;
  readonly status?: CardStatus;
  readonly enablePolling?: boolean;
  readonly standalone?: boolean;
  readonly deviceId?: string | null;
}

export interface Rejection {
  /** Index of the row in the input. */
  readonly row: number;
  readonly code: DomainErrorCode;
  readonly field: string;
  readonly reason: string;
}

/** Validates one row's shape (not existence of referenced rows). Throws DomainError. */
export function normaliseCard(input: NewCard): CardRow {
  if (typeof input.iccid !== 'string' || !ICCID.test(input.iccid)) throw DomainError.invalid('iccid', 'iccid must be 18-22 digits');
  if (input.msisdn !== undefined && input.msisdn !== null && (typeof input.msisdn !== 'string' || !MSISDN.test(input.msisdn))) {
    throw DomainError.invalid('msisdn', 'msisdn must be 5-20 digits, optionally after +');
  }
  const carrierId = requireId(input.carrierId, 'carrierId');
  const status = input.status ?? 'active';
  if (!isCardStatus(status)) throw DomainError.invalid('status', `status must be one of the card statuses`);
  if (input.enablePolling !== undefined && typeof input.enablePolling !== 'boolean')
    throw DomainError.invalid('enablePolling', 'enablePolling must be true or false');
  if (input.standalone !== undefined && typeof input.standalone !== 'boolean') throw DomainError.invalid('standalone', 'standalone must be true or false');
  const deviceId = input.deviceId === undefined || input.deviceId === null ? null : requireId(input.deviceId, 'deviceId');
  return {
    iccid: input.iccid.toUpperCase(),
    msisdn: input.msisdn ?? null,
    carrierId,
    status,
    enablePolling: input.enablePolling ?? true,
    deviceId,
    // A card in a device follows the device's switch unless explicitly standalone.
    standalone: input.standalone ?? deviceId === null,
  };
}

/** The update an already validated row asks for (see {@link CardUpdateRow}). */
export function updateOf(input: NewCard, card: CardRow): CardUpdateRow {
  const given = (field: keyof NewCard): boolean => input[field] !== undefined;
  return {
    iccid: card.iccid,
    carrierId: card.carrierId,
    ...(given('msisdn') ? { msisdn: card.msisdn } : {}),
    ...(given('status') ? { status: card.status } : {}),
    ...(given('enablePolling') ? { enablePolling: card.enablePolling } : {}),
    ...(given('deviceId') ? { deviceId: card.deviceId } : {}),
    // Binding to a device (or unbinding) without saying otherwise sets the default a new card would get.
    ...(given('standalone') || given('deviceId') ? { standalone: card.standalone } : {}),
  };
}

export function rejectionOf(row: number, error: unknown): Rejection {
  if (error instanceof DomainError) return { row, code: error.code, field: error.field ?? 'row', reason: error.message };
  throw error;
}
