/** Validation of carrier account input; every failure names the API field. */
import { isGatewayCheckType, type GatewayCheckType } from '../workflow-safe/checkTypes.js';
import { DomainError } from './errors.js';
import type { CarrierPatch, RateLimitGroup } from './carrier.js';
import { requireBoolean, requireInt, requireNumber, requireText } from './validate.js';

const GROUP_NAME = /^[A-Za-z0-9_.-]{1,64}$/;
/** Whole calls per second of one rate-limit group (the table allows up to this). */
export const MAX_QPS = 100_000;

/**
 * Bounds of the numeric account fields: the table checks of migration 000002, stated once for
 * these validators and the API's JSON schemas (so the OpenAPI document shows them too).
 */
export const CARRIER_LIMITS = {
  inflightLimit: { minimum: 1, maximum: 100_000 },
  priorityRatio: { minimum: 0, maximum: 1 },
  leaseMs: { minimum: 1000, maximum: 3_600_000 },
  stepTimeoutMs: { minimum: 100, maximum: 600_000 },
  totalTimeoutMs: { minimum: 100, maximum: 3_600_000 },
  backoffBaseMs: { minimum: 100, maximum: 86_400_000 },
  failureAlertThreshold: { minimum: 1, maximum: 1000 },
  accountAlertThreshold: { minimum: 1, maximum: 1_000_000 },
  accountAlertWindowMs: { minimum: 1000, maximum: 604_800_000 },
} as const;

type IntegerLimitField = Exclude<keyof typeof CARRIER_LIMITS, 'priorityRatio'>;

function requireWithin(input: CarrierPatch, field: IntegerLimitField): void {
  const value = input[field];
  if (value !== undefined) requireInt(value, field, CARRIER_LIMITS[field].minimum, CARRIER_LIMITS[field].maximum);
}

export function validateGroups(groups: unknown): RateLimitGroup[] {
  if (!Array.isArray(groups)) throw DomainError.invalid('groups', 'groups must be an array');
  const seen = new Set<string>();
  return groups.map((group: unknown, index) => {
    const field = `groups[${index}]`;
    if (typeof group !== 'object' || group === null) throw DomainError.invalid(field, `${field} must be an object`);
    const { name, qps } = group as { name?: unknown; qps?: unknown };
    if (typeof name !== 'string' || !GROUP_NAME.test(name)) {
      throw DomainError.invalid(`${field}.name`, `${field}.name must be 1-64 characters of A-Z a-z 0-9 _ . -`);
    }
    if (seen.has(name)) throw DomainError.conflict(`${field}.name`, `group "${name}" is listed twice`);
    seen.add(name);
    // Whole calls per second: the limiter's one-second windows admit an integer number of calls.
    return { name, qps: requireInt(qps, `${field}.qps`, 1, MAX_QPS) };
  });
}

/** Checks the type → group map against the account's (final) group names. */
export function validateTypeGroups(typeGroups: unknown, groupNames: ReadonlySet<string>): Partial<Record<GatewayCheckType, string>> {
  if (typeof typeGroups !== 'object' || typeGroups === null || Array.isArray(typeGroups)) {
    throw DomainError.invalid('typeGroups', 'typeGroups must be an object');
  }
  const result: Partial<Record<GatewayCheckType, string>> = {};
  for (const [type, group] of Object.entries(typeGroups)) {
    const field = `typeGroups.${type}`;
    if (!isGatewayCheckType(type)) throw DomainError.invalid(field, `${type} is not a gateway check type`);
    if (typeof group !== 'string' || !groupNames.has(group)) throw DomainError.invalid(field, `${field} names no group of this account`);
    result[type] = group;
  }
  return result;
}

/** Scalar fields, validated when present. Cross-field limits (total ≤ lease …) are left to the table checks. */
export function validateCarrierScalars(input: CarrierPatch): void {
  if (input.name !== undefined) requireText(input.name, 'name');
  if (input.gatewayAccount !== undefined) requireText(input.gatewayAccount, 'gatewayAccount');
  if (input.enabled !== undefined) requireBoolean(input.enabled, 'enabled');
  if (input.realnameControl !== undefined) requireBoolean(input.realnameControl, 'realnameControl');
  if (input.priorityRatio !== undefined) {
    requireNumber(input.priorityRatio, 'priorityRatio', CARRIER_LIMITS.priorityRatio.minimum, CARRIER_LIMITS.priorityRatio.maximum);
  }
  for (const field of Object.keys(CARRIER_LIMITS) as (keyof typeof CARRIER_LIMITS)[]) if (field !== 'priorityRatio') requireWithin(input, field);
  const secret = input.eventSecret;
  if (secret !== undefined && secret !== null && (typeof secret !== 'string' || secret.length < 16 || secret.length > 200)) {
    throw DomainError.invalid('eventSecret', 'eventSecret must be a string of 16 to 200 characters (or null to clear it)');
  }
}
