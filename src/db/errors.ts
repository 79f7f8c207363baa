/**
 * Reading PostgreSQL's errors: their SQLSTATE, a one-line description for logs and dead letters,
 * and constraint violations mapped to {@link DomainError}s naming the API field, so the database
 * constraints are the last line of defence and still produce a useful answer.
 */
import { DomainError } from '../domain/errors.js';

/** The error's SQLSTATE (five characters), if PostgreSQL sent one. */
export function sqlState(error: unknown): string | undefined {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** `[SQLSTATE] message (detail)`, at most 2000 characters. */
export function describeFailure(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const state = sqlState(error);
  const detail =
    typeof error === 'object' && error !== null && typeof (error as { detail?: unknown }).detail === 'string'
      ? ` (${(error as { detail: string }).detail})`
      : '';
  return `${state ? `[${state}] ` : ''}${message}${detail}`.slice(0, 2000);
}

interface PgError {
  readonly code: string;
  readonly constraint?: string;
  readonly detail?: string;
}

export function isPgError(error: unknown): error is PgError {
  return typeof error === 'object' && error !== null && typeof (error as { code?: unknown }).code === 'string';
}

/** constraint name → API field. Constraints not listed fall back to the constraint name. */
const CONSTRAINT_FIELDS: Readonly<Record<string, string>> = {
  carrier_account_name_key: 'name',
  carrier_account_name_check: 'name',
  carrier_account_gateway_account_check: 'gatewayAccount',
  carrier_account_inflight_limit_check: 'inflightLimit',
  carrier_account_priority_ratio_check: 'priorityRatio',
  carrier_account_lease_ms_check: 'leaseMs',
  carrier_account_step_timeout_ms_check: 'stepTimeoutMs',
  carrier_account_total_timeout_ms_check: 'totalTimeoutMs',
  carrier_account_backoff_base_ms_check: 'backoffBaseMs',
  carrier_account_failure_alert_threshold_check: 'failureAlertThreshold',
  carrier_account_account_alert_threshold_check: 'accountAlertThreshold',
  carrier_account_account_alert_window_ms_check: 'accountAlertWindowMs',
  rate_limit_group_pkey: 'groups',
  rate_limit_group_name_check: 'groups',
  rate_limit_group_qps_check: 'groups',
  check_type_group_group_name_fkey: 'typeGroups',
  check_type_group_carrier_id_group_name_fkey: 'typeGroups',
  check_type_group_check_type_check: 'typeGroups',
  iot_card_iccid_key: 'iccid',
  iot_card_iccid_check: 'iccid',
  iot_card_msisdn_check: 'msisdn',
  iot_card_status_check: 'status',
  iot_card_carrier_id_fkey: 'carrierId',
  device_device_no_key: 'deviceNo',
  device_sim_binding_active_card_key: 'deviceId',
  device_sim_binding_device_id_fkey: 'deviceId',
  polling_config_name_key: 'name',
  polling_config_name_check: 'name',
  polling_config_match_check: 'match',
  polling_priority_item_card_id_fkey: 'cardId',
  polling_priority_item_types_check: 'types',
};

/** Rethrows constraint violations as DomainError; anything else is rethrown unchanged. */
export function mapPgError(error: unknown): never {
  if (isPgError(error) && error.constraint) {
    const field = CONSTRAINT_FIELDS[error.constraint] ?? error.constraint;
    const detail = error.detail ? `: ${error.detail}` : '';
    switch (error.code) {
      case '23505':
        throw DomainError.conflict(field, `${field} already exists${detail}`);
      case '23503':
        // A missing referenced row (unknown account, device …) is the caller's "not found".
        throw DomainError.notFound(field, `${field} refers to a row that does not exist${detail}`);
      case '23514':
      case '23502':
        throw DomainError.invalid(field, `${field} violates ${error.constraint}${detail}`);
      default:
        break;
    }
  }
  throw error;
}

/** Runs fn and maps constraint violations. */
export async function mapped<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    return mapPgError(error);
  }
}

/** As {@link mapped}, but a violation of `constraint` is rethrown as it is (its caller handles it). */
export async function mappedExcept<T>(constraint: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    if (isPgError(error) && error.constraint === constraint) throw error;
    return mapPgError(error);
  }
}
