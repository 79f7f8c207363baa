/**
 * JSON schemas of the request bodies and parameters (DESIGN §10 field names). They catch shape
 * errors (types, unknown fields, missing fields) before a handler runs; range and cross-field
 * rules stay in the domain validators so the API, the CLI and the repositories agree.
 */
import { CARD_STATUSES } from '../domain/card.js';
import { CHECK_TYPES, GATEWAY_CHECK_TYPES } from '../common/checkTypes.js';

const idString = { type: 'string', pattern: '^[1-9][0-9]{0,18}$', description: 'decimal id' } as const;

export const idParams = {
  type: 'object',
  required: ['id'],
  properties: { id: idString },
} as const;

export const errorSchema = {
  type: 'object',
  properties: {
    error: {
      type: 'object',
      properties: { code: { type: 'string' }, message: { type: 'string' }, field: { type: 'string' } },
    },
  },
} as const;

const carrierProperties = {
  name: { type: 'string', minLength: 1, maxLength: 200 },
  gatewayAccount: { type: 'string', minLength: 1, maxLength: 200 },
  enabled: { type: 'boolean' },
  inflightLimit: { type: 'integer' },
  priorityRatio: { type: 'number' },
  leaseMs: { type: 'integer' },
  stepTimeoutMs: { type: 'integer' },
  totalTimeoutMs: { type: 'integer' },
  realnameControl: { type: 'boolean' },
  backoffBaseMs: { type: 'integer' },
  failureAlertThreshold: { type: 'integer' },
  accountAlertThreshold: { type: 'integer' },
  accountAlertWindowMs: { type: 'integer' },
  groups: {
    type: 'array',
    maxItems: 64,
    items: {
      type: 'object',
      required: ['name', 'qps'],
      additionalProperties: false,
      properties: { name: { type: 'string' }, qps: { type: 'number' } },
    },
  },
  typeGroups: {
    type: 'object',
    additionalProperties: false,
    properties: Object.fromEntries(GATEWAY_CHECK_TYPES.map((type) => [type, { type: 'string' }])),
  },
} as const;

export const newCarrierSchema = {
  type: 'object',
  required: ['name', 'gatewayAccount'],
  additionalProperties: false,
  properties: carrierProperties,
} as const;

export const carrierPatchSchema = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: carrierProperties,
} as const;

const intervalsSchema = {
  type: 'object',
  additionalProperties: false,
  // null clears a type on PATCH (the rule stops setting it).
  properties: Object.fromEntries(CHECK_TYPES.map((type) => [type, { type: ['integer', 'null'] }])),
} as const;

const pollingConfigProperties = {
  name: { type: 'string', minLength: 1, maxLength: 200 },
  priority: { type: 'integer' },
  enabled: { type: 'boolean' },
  match: {
    type: 'object',
    additionalProperties: false,
    properties: { carrierId: { type: ['string', 'null'] }, cardStatus: { type: ['string', 'null'], enum: [...CARD_STATUSES, null] } },
  },
  intervalsSec: intervalsSchema,
} as const;

export const newPollingConfigSchema = {
  type: 'object',
  required: ['name', 'intervalsSec'],
  additionalProperties: false,
  properties: pollingConfigProperties,
} as const;

export const pollingConfigPatchSchema = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: pollingConfigProperties,
} as const;

export const newCardSchema = {
  type: 'object',
  required: ['iccid', 'carrierId'],
  additionalProperties: false,
  properties: {
    iccid: { type: 'string' },
    msisdn: { type: 'string' },
    carrierId: idString,
    status: { type: 'string', enum: [...CARD_STATUSES] },
    enablePolling: { type: 'boolean' },
    deviceId: idString,
    standalone: { type: 'boolean' },
  },
} as const;

export const cardPatchSchema = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: {
    enablePolling: { type: 'boolean' },
    status: { type: 'string', enum: [...CARD_STATUSES] },
    carrierId: idString,
  },
} as const;

export const requestCheckSchema = {
  type: 'object',
  required: ['types'],
  additionalProperties: false,
  properties: {
    types: { type: 'array', minItems: 1, maxItems: CHECK_TYPES.length, items: { type: 'string', enum: [...CHECK_TYPES] } },
    lane: { type: 'string', enum: ['priority', 'normal'] },
    cooldownMs: { type: 'integer', minimum: 0 },
    confirmDelaysSec: { type: 'array', items: { type: 'integer' } },
    expected: { type: 'string' },
  },
} as const;

export const modeSchema = {
  type: 'object',
  required: ['mode'],
  additionalProperties: false,
  properties: { mode: { type: 'string', enum: ['carrier', 'legacy'] } },
} as const;
