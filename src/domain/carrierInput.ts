/** Validation of carrier account input; every failure names the API field. */
import { isGatewayCheckType, type GatewayCheckType } from '../common/checkTypes.js';
import { DomainError } from './errors.js';
import type { CarrierPatch, RateLimitGroup } from './carrier.js';
import { requireBoolean, requireInt, requireNumber, requireText } from './validate.js';

const GROUP_NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const MAX_QPS = 100_000;

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
  if (input.inflightLimit !== undefined) requireInt(input.inflightLimit, 'inflightLimit', 1, 100_000);
  if (input.priorityRatio !== undefined) requireNumber(input.priorityRatio, 'priorityRatio', 0, 1);
  if (input.leaseMs !== undefined) requireInt(input.leaseMs, 'leaseMs', 1000, 3_600_000);
  if (input.stepTimeoutMs !== undefined) requireInt(input.stepTimeoutMs, 'stepTimeoutMs', 100, 600_000);
  if (input.totalTimeoutMs !== undefined) requireInt(input.totalTimeoutMs, 'totalTimeoutMs', 100, 3_600_000);
  if (input.backoffBaseMs !== undefined) requireInt(input.backoffBaseMs, 'backoffBaseMs', 100, 86_400_000);
  if (input.failureAlertThreshold !== undefined) requireInt(input.failureAlertThreshold, 'failureAlertThreshold', 1, 1000);
  if (input.accountAlertThreshold !== undefined) requireInt(input.accountAlertThreshold, 'accountAlertThreshold', 1, 1_000_000);
  if (input.accountAlertWindowMs !== undefined) requireInt(input.accountAlertWindowMs, 'accountAlertWindowMs', 1000, 604_800_000);
}
