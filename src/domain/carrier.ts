/** Carrier account domain types. */
import type { GatewayCheckType } from '../workflow-safe/checkTypes.js';

export interface RateLimitGroup {
  readonly name: string;
  readonly qps: number;
}

export interface Carrier {
  readonly id: string;
  readonly name: string;
  readonly gatewayAccount: string;
  readonly enabled: boolean;
  readonly inflightLimit: number;
  readonly priorityRatio: number;
  readonly leaseMs: number;
  readonly stepTimeoutMs: number;
  readonly totalTimeoutMs: number;
  readonly realnameControl: boolean;
  readonly backoffBaseMs: number;
  readonly failureAlertThreshold: number;
  readonly accountAlertThreshold: number;
  readonly accountAlertWindowMs: number;
  readonly groups: readonly RateLimitGroup[];
  readonly typeGroups: Partial<Record<GatewayCheckType, string>>;
  /** Whether the account has an event secret: it accepts pushed events (the secret itself is never read back). */
  readonly eventSecretSet: boolean;
}

/**
 * The column defaults of `carrier_account` (migrations/000002) for the two limits an execution
 * still needs when its account row has gone (deleted while the card ran).
 */
export const DEFAULT_LEASE_MS = 60_000;
export const DEFAULT_BACKOFF_BASE_MS = 30_000;

/** Input for create; omitted limits take the column defaults. */
export interface NewCarrier {
  readonly name: string;
  readonly gatewayAccount: string;
  readonly enabled?: boolean;
  readonly inflightLimit?: number;
  readonly priorityRatio?: number;
  readonly leaseMs?: number;
  readonly stepTimeoutMs?: number;
  readonly totalTimeoutMs?: number;
  readonly realnameControl?: boolean;
  readonly backoffBaseMs?: number;
  readonly failureAlertThreshold?: number;
  readonly accountAlertThreshold?: number;
  readonly accountAlertWindowMs?: number;
  readonly groups?: readonly RateLimitGroup[];
  readonly typeGroups?: Partial<Record<GatewayCheckType, string>>;
  /** Authenticates the account's pushed events (POST /v1/events); null clears it (no events accepted). */
  readonly eventSecret?: string | null;
}

/** Patch: every field optional; `groups` / `typeGroups` replace the whole set when given. */
export type CarrierPatch = Partial<NewCarrier>;
