/**
 * Check types and their properties. Pure data: safe to import from workflow code.
 */
export const CHECK_TYPES = ['card_status', 'carddata', 'realname', 'package'] as const;
export type CheckType = (typeof CHECK_TYPES)[number];

/** Types that call the carrier gateway (`package` is evaluated locally from stored data). */
export const GATEWAY_CHECK_TYPES = ['card_status', 'carddata', 'realname'] as const;
export type GatewayCheckType = (typeof GATEWAY_CHECK_TYPES)[number];

export function isCheckType(value: unknown): value is CheckType {
  return typeof value === 'string' && (CHECK_TYPES as readonly string[]).includes(value);
}

export function isGatewayCheckType(value: unknown): value is GatewayCheckType {
  return typeof value === 'string' && (GATEWAY_CHECK_TYPES as readonly string[]).includes(value);
}
