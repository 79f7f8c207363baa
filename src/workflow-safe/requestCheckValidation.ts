/**
 * Validation of a request-check, shared by the workflow update validator (bad input never reaches
 * history) and the API/CLI (same messages everywhere). Pure: workflow-safe.
 */
import { isCheckType } from './checkTypes.js';
import { idProblem } from './ids.js';
import type { RequestCheckInput } from './requestCheck.js';

export class RequestCheckInvalid extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
    this.name = 'RequestCheckInvalid';
  }
}

/** Failure type of a request-check the scheduler's activity rejected for good; retrying the same request cannot help. */
export const REQUEST_CHECK_REJECTED = 'request_check_rejected';

/** The code and field of such a rejection, carried in the failure's details for the API's answer. */
export interface RequestCheckRejection {
  readonly code: 'invalid' | 'not_found';
  readonly field?: string;
}

export const MAX_CONFIRM_DELAYS = 20;
export const MAX_CONFIRM_DELAY_SEC = 3600;
/** The longest cooldown a priority item stores (src/db/priorityItems.ts refuses more). */
export const MAX_COOLDOWN_MS = 86_400_000;
/** The longest expected state name (it travels in a `|`/`,`-separated Redis field). */
export const MAX_EXPECTED_LENGTH = 64;

/** Throws {@link RequestCheckInvalid} naming the first bad field. */
export function validateRequestCheck(input: RequestCheckInput): void {
  const badId = idProblem(input.cardId);
  if (badId !== undefined) throw new RequestCheckInvalid('cardId', badId);
  if (!Array.isArray(input.types) || input.types.length === 0) throw new RequestCheckInvalid('types', 'must be a non-empty array of check types');
  for (const type of input.types) {
    if (!isCheckType(type)) throw new RequestCheckInvalid('types', `unknown check type ${JSON.stringify(type)} (card_status, carddata, realname, package)`);
  }
  if (input.lane !== undefined && input.lane !== 'priority' && input.lane !== 'normal')
    throw new RequestCheckInvalid('lane', `must be "priority" or "normal", got ${JSON.stringify(input.lane)}`);
  if (input.cooldownMs !== undefined && (!Number.isInteger(input.cooldownMs) || input.cooldownMs < 0 || input.cooldownMs > MAX_COOLDOWN_MS))
    throw new RequestCheckInvalid('cooldownMs', `must be an integer from 0 to ${MAX_COOLDOWN_MS} (one day), got ${JSON.stringify(input.cooldownMs)}`);
  if (input.confirmDelaysSec !== undefined) {
    if (!Array.isArray(input.confirmDelaysSec) || input.confirmDelaysSec.length > MAX_CONFIRM_DELAYS)
      throw new RequestCheckInvalid('confirmDelaysSec', `must be an array of at most ${MAX_CONFIRM_DELAYS} delays`);
    for (const delay of input.confirmDelaysSec) {
      if (!Number.isInteger(delay) || delay <= 0 || delay > MAX_CONFIRM_DELAY_SEC)
        throw new RequestCheckInvalid('confirmDelaysSec', `each delay must be an integer in 1..${MAX_CONFIRM_DELAY_SEC} seconds`);
    }
    if (input.confirmDelaysSec.length > 0 && (input.expected === undefined || input.expected === ''))
      throw new RequestCheckInvalid('expected', 'is required when confirmDelaysSec is given');
  }
  if (
    input.expected !== undefined &&
    (typeof input.expected !== 'string' || input.expected.length > MAX_EXPECTED_LENGTH || input.expected.includes('|') || input.expected.includes(','))
  ) {
    throw new RequestCheckInvalid('expected', 'must be a short state name such as "offline"');
  }
}
