/**
 * The gateway wire contract (docs/gateway-contract.md), shared by the client and the simulator so
 * the two cannot drift apart. Pure data and zod schemas: no I/O here.
 */
import { z } from 'zod';
import type { GatewayCheckType } from '../workflow-safe/checkTypes.js';

/** Path of the endpoint for one check type. */
export function checkPath(type: GatewayCheckType): string {
  return `/v1/checks/${type}`;
}

/** Request body of every check endpoint. */
export const checkRequestSchema = z.object({
  /** The carrier account the card is issued under (the platform's account id at the carrier). */
  account: z.string().min(1).max(200),
  iccid: z.string().min(1).max(40),
  /** Optional caller id for tracing; echoed in logs only. */
  requestId: z.string().max(200).optional(),
});
export type CheckRequest = z.infer<typeof checkRequestSchema>;

export const NETWORK_STATES = ['online', 'offline'] as const;
export type NetworkState = (typeof NETWORK_STATES)[number];
export const REALNAME_STATES = ['verified', 'unverified'] as const;
export type RealnameState = (typeof REALNAME_STATES)[number];

export const cardStatusObservationSchema = z.object({
  network: z.enum(NETWORK_STATES),
  /** Administrative state at the carrier: `suspended` after a stop, `active` after a resume. */
  status: z.enum(['active', 'suspended']),
});
export const carddataObservationSchema = z.object({
  /** Data used in the current billing period, kilobytes. */
  usageKb: z.number().nonnegative(),
  /** First day of the billing period, ISO date (YYYY-MM-DD). */
  periodStart: z.string().regex(/^\d{4}-\d{2}-\d{2}$/),
});
export const realnameObservationSchema = z.object({
  realname: z.enum(REALNAME_STATES),
});

export type CardStatusObservation = z.infer<typeof cardStatusObservationSchema>;
export type CarddataObservation = z.infer<typeof carddataObservationSchema>;
export type RealnameObservation = z.infer<typeof realnameObservationSchema>;

export interface ObservationByType {
  card_status: CardStatusObservation;
  carddata: CarddataObservation;
  realname: RealnameObservation;
}

export const observationSchemas = {
  card_status: cardStatusObservationSchema,
  carddata: carddataObservationSchema,
  realname: realnameObservationSchema,
} as const;

/** Success body (HTTP 200). `observation` is validated per type by {@link observationSchemas}. */
export const checkResponseSchema = z.object({
  type: z.enum(['card_status', 'carddata', 'realname']),
  account: z.string(),
  iccid: z.string(),
  /** Unique id of this observation at the gateway; ingest deduplicates by it. */
  collectionId: z.string().min(1).max(200),
  /** When the carrier observed the state (ISO 8601, UTC). */
  observedAt: z.iso.datetime({ offset: true }),
  /** When the carrier saw this state change, where it knows (ISO 8601): staleness is measured from it. */
  changedAt: z.iso.datetime({ offset: true }).optional(),
  observation: z.unknown(),
});

export const GATEWAY_ERROR_CLASSES = ['rate_limited', 'transient', 'permanent', 'invalid_response'] as const;
export type GatewayErrorClass = (typeof GATEWAY_ERROR_CLASSES)[number];

/** Error body (any non-2xx status). */
export const errorResponseSchema = z.object({
  error: z.object({
    class: z.enum(GATEWAY_ERROR_CLASSES),
    /** Machine-readable reason, e.g. `qps_exceeded`, `invalid_iccid`, `carrier_unavailable`. */
    code: z.string().max(200).optional(),
    message: z.string().max(2000).optional(),
    /** For `rate_limited`: how long until a call may succeed again. */
    retryAfterMs: z.number().int().nonnegative().optional(),
  }),
});
export type ErrorResponse = z.infer<typeof errorResponseSchema>;
