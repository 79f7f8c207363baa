/** Validation of polling config input (minimum interval, known types, match keys). */
import { isCheckType } from '../workflow-safe/checkTypes.js';
import { isCardStatus } from './card.js';
import { DomainError } from './errors.js';
import { MAX_INTERVAL_SEC, MIN_INTERVAL_SEC, type Intervals, type PollingConfigPatch, type PollingMatch } from './pollingConfig.js';
import { requireBoolean, requireId, requireInt, requireText } from './validate.js';

export function validateIntervals(value: unknown, minIntervalSec = MIN_INTERVAL_SEC): Intervals {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw DomainError.invalid('intervalsSec', 'intervalsSec must be an object');
  const intervals: Intervals = {};
  for (const [type, seconds] of Object.entries(value)) {
    const field = `intervalsSec.${type}`;
    if (!isCheckType(type)) throw DomainError.invalid(field, `${type} is not a check type`);
    // null clears the type (not polled by this rule).
    if (seconds === null || seconds === undefined) continue;
    if (typeof seconds === 'number' && Number.isInteger(seconds) && seconds < minIntervalSec) {
      throw DomainError.invalid(field, `${field} is below the minimum interval of ${minIntervalSec} s`);
    }
    intervals[type] = requireInt(seconds, field, minIntervalSec, MAX_INTERVAL_SEC);
  }
  return intervals;
}

export function validateMatch(value: unknown): PollingMatch {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw DomainError.invalid('match', 'match must be an object');
  const match: { carrierId?: string; cardStatus?: PollingMatch['cardStatus'] } = {};
  for (const [key, field] of Object.entries(value)) {
    if (key === 'carrierId') {
      if (field !== undefined && field !== null) match.carrierId = requireId(field, 'match.carrierId');
    } else if (key === 'cardStatus') {
      if (field === undefined || field === null) continue;
      if (!isCardStatus(field)) throw DomainError.invalid('match.cardStatus', 'match.cardStatus must be a card status');
      match.cardStatus = field;
    } else {
      throw DomainError.invalid(`match.${key}`, `match.${key} is not a match key (carrierId, cardStatus)`);
    }
  }
  return match;
}

/** Bounds of a rule's priority (higher wins), for this validator and the API's JSON schema. */
export const POLLING_PRIORITY_LIMITS = { minimum: -1_000_000, maximum: 1_000_000 } as const;

export function validatePollingConfigPatch(patch: PollingConfigPatch, minIntervalSec = MIN_INTERVAL_SEC): void {
  if (patch.name !== undefined) requireText(patch.name, 'name');
  if (patch.priority !== undefined) requireInt(patch.priority, 'priority', POLLING_PRIORITY_LIMITS.minimum, POLLING_PRIORITY_LIMITS.maximum);
  if (patch.enabled !== undefined) requireBoolean(patch.enabled, 'enabled');
  if (patch.match !== undefined) validateMatch(patch.match);
  if (patch.intervalsSec !== undefined) validateIntervals(patch.intervalsSec, minIntervalSec);
}
