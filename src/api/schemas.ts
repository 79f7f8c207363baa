/**
 * JSON schemas of the requests and answers (their field names are the API's contract). Request schemas catch shape
 * errors (types, unknown fields, missing fields) before a handler runs; range and cross-field
 * rules stay in the domain validators so the API, the CLI and the repositories agree. Answer
 * schemas serialise the responses and, through the type provider, type what handlers return;
 * both feed the OpenAPI document.
 */
import { CARD_STATUSES } from '../domain/card.js';
import { CHECK_TYPES, GATEWAY_CHECK_TYPES } from '../workflow-safe/checkTypes.js';
import { ID_PATTERN, ID_RULE } from '../workflow-safe/ids.js';
import { MAX_CONFIRM_DELAY_SEC, MAX_CONFIRM_DELAYS, MAX_COOLDOWN_MS, MAX_EXPECTED_LENGTH } from '../workflow-safe/requestCheckValidation.js';
import { CARRIER_LIMITS, MAX_QPS } from '../domain/carrierInput.js';
import { MAX_INTERVAL_SEC } from '../domain/pollingConfig.js';
import { POLLING_PRIORITY_LIMITS } from '../domain/pollingConfigInput.js';
import { MAX_BULK_REQUEST_CARDS } from '../app/bulkRequestCheck.js';

/** `{ key: schema }` for each key, typed with the literal keys so the type provider sees them. */
function propertiesOf<const K extends string, const S>(keys: readonly K[], schema: S): { readonly [P in K]: S } {
  return Object.fromEntries(keys.map((key) => [key, schema])) as { readonly [P in K]: S };
}

/** An id as the database holds it (bigint): the pattern admits 1..9223372036854775807 only. */
export const idString = { type: 'string', pattern: ID_PATTERN, description: ID_RULE } as const;

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
  inflightLimit: { type: 'integer', ...CARRIER_LIMITS.inflightLimit },
  priorityRatio: { type: 'number', ...CARRIER_LIMITS.priorityRatio },
  leaseMs: { type: 'integer', ...CARRIER_LIMITS.leaseMs },
  stepTimeoutMs: { type: 'integer', ...CARRIER_LIMITS.stepTimeoutMs },
  totalTimeoutMs: { type: 'integer', ...CARRIER_LIMITS.totalTimeoutMs, description: 'at least stepTimeoutMs, at most leaseMs' },
  realnameControl: { type: 'boolean' },
  backoffBaseMs: { type: 'integer', ...CARRIER_LIMITS.backoffBaseMs },
  failureAlertThreshold: { type: 'integer', ...CARRIER_LIMITS.failureAlertThreshold },
  accountAlertThreshold: { type: 'integer', ...CARRIER_LIMITS.accountAlertThreshold },
  accountAlertWindowMs: { type: 'integer', ...CARRIER_LIMITS.accountAlertWindowMs },
  eventSecret: {
    type: ['string', 'null'],
    minLength: 16,
    maxLength: 200,
    description: 'write-only: the HMAC key of the pushed events this account accepts (POST /v1/events); null clears it. Answers say only eventSecretSet',
  },
  groups: {
    type: 'array',
    maxItems: 64,
    items: {
      type: 'object',
      required: ['name', 'qps'],
      additionalProperties: false,
      properties: { name: { type: 'string' }, qps: { type: 'integer', minimum: 1, maximum: MAX_QPS, description: 'whole calls per second' } },
    },
  },
  typeGroups: {
    type: 'object',
    additionalProperties: false,
    properties: propertiesOf(GATEWAY_CHECK_TYPES, { type: 'string' } as const),
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
  properties: propertiesOf(CHECK_TYPES, { type: ['integer', 'null'], minimum: 1, maximum: MAX_INTERVAL_SEC } as const),
} as const;

const pollingConfigProperties = {
  name: { type: 'string', minLength: 1, maxLength: 200 },
  priority: { type: 'integer', ...POLLING_PRIORITY_LIMITS },
  enabled: { type: 'boolean' },
  match: {
    type: 'object',
    additionalProperties: false,
    properties: {
      carrierId: { type: ['string', 'null'], pattern: ID_PATTERN, description: ID_RULE },
      cardStatus: { type: ['string', 'null'], enum: [...CARD_STATUSES, null] },
    },
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
    cooldownMs: { type: 'integer', minimum: 0, maximum: MAX_COOLDOWN_MS },
    confirmDelaysSec: { type: 'array', maxItems: MAX_CONFIRM_DELAYS, items: { type: 'integer', minimum: 1, maximum: MAX_CONFIRM_DELAY_SEC } },
    expected: { type: 'string', maxLength: MAX_EXPECTED_LENGTH },
  },
} as const;

/** A bulk request-check: the fields of one, for every card named by `cardIds` or by `filter` (exactly one of them). */
export const bulkRequestCheckSchema = {
  type: 'object',
  required: ['types'],
  additionalProperties: false,
  properties: {
    ...requestCheckSchema.properties,
    cardIds: { type: 'array', minItems: 1, maxItems: MAX_BULK_REQUEST_CARDS, items: idString },
    filter: {
      type: 'object',
      required: ['carrierId'],
      additionalProperties: false,
      description: "the account's polled cards, of this status when given",
      properties: { carrierId: idString, status: { type: 'string', enum: [...CARD_STATUSES] } },
    },
  },
} as const;

export const modeSchema = {
  type: 'object',
  required: ['mode'],
  additionalProperties: false,
  properties: { mode: { type: 'string', enum: ['carrier', 'legacy'] } },
} as const;

/* ---- Answers ---- */

const dateTime = { type: 'string', format: 'date-time' } as const;
const checkType = { type: 'string', enum: [...CHECK_TYPES] } as const;
const cardStatus = { type: 'string', enum: [...CARD_STATUSES] } as const;

/** `{ items, nextCursor? }` of a list route. */
export function pageOfSchema<const S>(item: S) {
  return {
    type: 'object',
    required: ['items'],
    additionalProperties: false,
    properties: { items: { type: 'array', items: item }, nextCursor: { type: 'string', description: 'pass as cursor for the next page; absent on the last' } },
  } as const;
}

// The secret is never answered back.
const { eventSecret: _eventSecret, ...carrierAnswerProperties } = carrierProperties;

export const carrierSchema = {
  type: 'object',
  required: [
    'id',
    'name',
    'gatewayAccount',
    'enabled',
    'inflightLimit',
    'priorityRatio',
    'leaseMs',
    'stepTimeoutMs',
    'totalTimeoutMs',
    'realnameControl',
    'backoffBaseMs',
    'failureAlertThreshold',
    'accountAlertThreshold',
    'accountAlertWindowMs',
    'groups',
    'typeGroups',
    'eventSecretSet',
  ],
  additionalProperties: false,
  properties: {
    id: idString,
    ...carrierAnswerProperties,
    eventSecretSet: { type: 'boolean', description: 'the account has an event secret (accepts pushed events)' },
    groups: {
      type: 'array',
      items: { type: 'object', required: ['name', 'qps'], additionalProperties: false, properties: { name: { type: 'string' }, qps: { type: 'number' } } },
    },
  },
} as const;

const intervalsAnswer = { type: 'object', additionalProperties: false, properties: propertiesOf(CHECK_TYPES, { type: 'integer' } as const) } as const;

export const pollingConfigSchema = {
  type: 'object',
  required: ['id', 'name', 'priority', 'enabled', 'match', 'intervalsSec'],
  additionalProperties: false,
  properties: {
    id: idString,
    name: { type: 'string' },
    priority: { type: 'integer' },
    enabled: { type: 'boolean' },
    match: { type: 'object', additionalProperties: false, properties: { carrierId: { type: 'string' }, cardStatus } },
    intervalsSec: intervalsAnswer,
  },
} as const;

const cardProperties = {
  id: idString,
  iccid: { type: 'string' },
  msisdn: { type: 'string' },
  carrierId: idString,
  status: cardStatus,
  enablePolling: { type: 'boolean' },
  deviceId: idString,
  standalone: { type: 'boolean' },
  polled: { type: 'boolean', description: 'its own switch and, unless standalone, its device switch are on' },
} as const;
const cardRequired = ['id', 'iccid', 'carrierId', 'status', 'enablePolling', 'standalone', 'polled'] as const;

export const cardSchema = { type: 'object', required: cardRequired, additionalProperties: false, properties: cardProperties } as const;

export const failureAlertSchema = {
  type: 'object',
  required: ['id', 'cardId', 'carrierId', 'type', 'status', 'failCount', 'openedAt'],
  additionalProperties: false,
  properties: {
    id: { type: 'string' },
    cardId: idString,
    carrierId: idString,
    type: checkType,
    status: { type: 'string', enum: ['open', 'recovered'] },
    failCount: { type: 'integer' },
    firstFailedAt: dateTime,
    lastError: { type: 'string' },
    openedAt: dateTime,
    recoveredAt: dateTime,
    ackedAt: dateTime,
    ackedBy: { type: 'string' },
  },
} as const;

export const cardDetailSchema = {
  type: 'object',
  required: [...cardRequired, 'due', 'failures', 'alerts', 'executions', 'temporalUiUrl'],
  additionalProperties: false,
  properties: {
    ...cardProperties,
    due: {
      type: 'object',
      additionalProperties: false,
      description: 'per type, epoch ms the next check is due',
      properties: propertiesOf(CHECK_TYPES, { type: 'number' } as const),
    },
    failures: {
      type: 'object',
      additionalProperties: false,
      description: 'per type, the current failure streak',
      properties: propertiesOf(CHECK_TYPES, {
        type: 'object',
        required: ['count'],
        additionalProperties: false,
        properties: { count: { type: 'integer' }, firstFailedAt: { type: 'number', description: 'epoch ms' }, lastError: { type: 'string' } },
      } as const),
    },
    alerts: { type: 'array', items: failureAlertSchema },
    executions: {
      type: 'array',
      description: 'newest first',
      items: {
        type: 'object',
        required: ['startedAt', 'types', 'outcome', 'gatewayMs', 'workflowId', 'runId', 'runUrl'],
        additionalProperties: false,
        properties: {
          startedAt: dateTime,
          finishedAt: dateTime,
          types: { type: 'array', items: checkType },
          outcome: { type: 'string' },
          gatewayMs: { type: 'number' },
          workflowId: { type: 'string', description: 'the run that executed the card: card-<id> (cardCheck) or the cardBatch run that carried it' },
          runId: { type: 'string' },
          runUrl: { type: 'string', description: "the run's page in the Temporal Web UI" },
          fromPriority: { type: 'boolean' },
        },
      },
    },
    temporalUiUrl: {
      type: 'string',
      description: 'the card\'s executions in the Temporal Web UI: query CardId="<id>" (CARD_RUN_SHAPE=card) or CardIds="<id>" (batch)',
    },
  },
} as const;

const qpsByGroup = { type: 'object', additionalProperties: { type: 'number' } } as const;
const limitedBy = { type: 'string', enum: ['none', 'budget', 'inflight', 'orchestration', 'ingest'] } as const;

export const carrierStatusSchema = {
  type: 'object',
  required: [
    'carrierId',
    'mode',
    'paused',
    'inflight',
    'lanes',
    'dueNow',
    'groups',
    'latenessMs',
    'staleness',
    'expiredLeases',
    'capacity',
    'limitedBy',
    'schedulerRunning',
    'rebuild',
  ],
  additionalProperties: false,
  properties: {
    carrierId: idString,
    mode: { type: 'string', enum: ['carrier', 'legacy'] },
    paused: { type: 'boolean' },
    inflight: { type: 'integer' },
    lanes: {
      type: 'object',
      required: ['priority', 'normal'],
      additionalProperties: false,
      properties: { priority: { type: 'integer' }, normal: { type: 'integer' } },
    },
    dueNow: { type: 'integer' },
    groups: {
      type: 'array',
      items: {
        type: 'object',
        required: ['name', 'qpsConfigured', 'qpsEffective', 'usedLastSecond'],
        additionalProperties: false,
        properties: { name: { type: 'string' }, qpsConfigured: { type: 'number' }, qpsEffective: { type: 'number' }, usedLastSecond: { type: 'integer' } },
      },
    },
    latenessMs: { type: 'object', required: ['p50', 'p99'], additionalProperties: false, properties: { p50: { type: 'number' }, p99: { type: 'number' } } },
    staleness: {
      type: 'object',
      description: 'per check type, change at the carrier (as its answers date it) → first observation carrying it, changes learned in the last hour',
      additionalProperties: false,
      properties: Object.fromEntries(
        CHECK_TYPES.map((type) => [
          type,
          {
            type: 'object',
            required: ['changes', 'p50Ms', 'p99Ms', 'maxMs'],
            additionalProperties: false,
            properties: { changes: { type: 'integer' }, p50Ms: { type: 'number' }, p99Ms: { type: 'number' }, maxMs: { type: 'number' } },
          },
        ]),
      ),
    },
    expiredLeases: { type: 'integer' },
    capacity: {
      type: 'object',
      required: ['requiredQps', 'budgetQps', 'requiredExecutionsPerSec', 'orchestrationCapacityPerSec', 'stretchFactor'],
      additionalProperties: false,
      properties: {
        requiredQps: { ...qpsByGroup, description: 'per group, the calls per second the configured intervals need' },
        budgetQps: { ...qpsByGroup, description: 'per group, the configured budget' },
        requiredExecutionsPerSec: { type: 'number' },
        orchestrationCapacityPerSec: { type: ['number', 'null'] },
        stretchFactor: { type: 'number', description: 'how much longer than configured the intervals really are (≥ 1)' },
      },
    },
    limitedBy: { type: 'string', enum: [...limitedBy.enum, 'unknown'] },
    orchestration: {
      type: 'object',
      required: ['limitedBy', 'inflightLimit', 'configuredInflightLimit', 'startsPerSec', 'startLagMs', 'capacityPerSec'],
      additionalProperties: false,
      properties: {
        limitedBy,
        inflightLimit: { type: 'integer' },
        configuredInflightLimit: { type: 'integer' },
        startsPerSec: { type: 'number' },
        startLagMs: { type: 'number', description: 'claim to the first workflow task of a card run (smoothed)' },
        queueLagMs: {
          type: 'number',
          description: "run creation to its first workflow task: the engine's queue (smoothed); absent from schedulers started by older code",
        },
        baseLagMs: { type: ['number', 'null'], description: 'queue lag with no queue (learnt); absent from schedulers started by older code' },
        capacityPerSec: { type: ['number', 'null'] },
        fairRatePerSec: {
          type: 'number',
          description:
            'its fair executions/s of a saturated engine shared with other accounts, weighted by budget; absent when the engine holds no account back',
        },
      },
    },
    schedulerRunning: { type: 'boolean' },
    rebuild: {
      type: 'object',
      description: "how far Redis holds the account's cards: a rebuild's progress",
      required: ['state', 'cardsDone', 'cardsTotal'],
      additionalProperties: false,
      properties: {
        state: {
          type: 'string',
          enum: ['idle', 'pending', 'running'],
          description: 'running: a rebuild holds the rebuild lock; pending: Redis lost its data (no rebuilt marker, carrier mode), the next reconcile rebuilds',
        },
        cardsDone: { type: 'integer', description: "cards in the account's lanes" },
        cardsTotal: { type: 'integer', description: 'cards PostgreSQL polls under the account (at least one interval)' },
      },
    },
  },
} as const;

const accountAlertProperties = {
  id: { type: 'string' },
  carrierId: idString,
  alertKind: { type: 'string' },
  status: { type: 'string' },
  alertCount: { type: 'integer' },
  threshold: { type: 'integer' },
  windowMs: { type: 'integer' },
  openedAt: dateTime,
  resolvedAt: dateTime,
  ackedAt: dateTime,
  ackedBy: { type: 'string' },
} as const;

export const accountAlertSchema = {
  type: 'object',
  required: ['kind', 'id', 'carrierId', 'alertKind', 'status', 'alertCount', 'threshold', 'windowMs', 'openedAt'],
  additionalProperties: false,
  properties: { kind: { type: 'string', enum: ['account'] }, ...accountAlertProperties },
} as const;

export const failureAlertItemSchema = {
  ...failureAlertSchema,
  required: [...failureAlertSchema.required, 'kind'],
  properties: { kind: { type: 'string', enum: ['failure'] }, ...failureAlertSchema.properties },
} as const;

/** An alert in the list or after an ack: ids carry their kind (`failure-12`, `account-3`). */
export const alertSchema = { anyOf: [accountAlertSchema, failureAlertItemSchema] } as const;

export const modeSettingSchema = {
  type: 'object',
  required: ['mode', 'updatedAt', 'updatedBy'],
  additionalProperties: false,
  properties: { mode: { type: 'string', enum: ['carrier', 'legacy'] }, updatedAt: dateTime, updatedBy: { type: 'string' } },
} as const;

export const modeSwitchSchema = {
  type: 'object',
  required: ['mode', 'changed'],
  additionalProperties: false,
  properties: { mode: { type: 'string', enum: ['carrier', 'legacy'] }, changed: { type: 'boolean' } },
} as const;

export const requestCheckAnswerSchema = {
  type: 'object',
  required: ['status', 'requested'],
  additionalProperties: false,
  properties: {
    status: { type: 'string', enum: ['requested', 'cooldown', 'not_polled'] },
    requested: { type: 'integer', description: 'number of types requested' },
    types: {
      type: 'object',
      additionalProperties: false,
      properties: propertiesOf(CHECK_TYPES, { type: 'string', enum: ['requested', 'cooldown', 'not_polled'] } as const),
    },
  },
} as const;

const BULK_STATUSES = ['requested', 'cooldown', 'not_polled', 'not_found', 'unavailable', 'failed'] as const;

export const bulkRequestCheckAnswerSchema = {
  type: 'object',
  required: ['cards', 'counts', 'results'],
  additionalProperties: false,
  properties: {
    cards: { type: 'integer', description: 'cards named (duplicates once)' },
    counts: { type: 'object', additionalProperties: false, properties: propertiesOf(BULK_STATUSES, { type: 'integer' } as const) },
    results: {
      type: 'array',
      items: {
        type: 'object',
        required: ['cardId', 'status', 'requested'],
        additionalProperties: false,
        properties: {
          cardId: { type: 'string' },
          status: { type: 'string', enum: [...BULK_STATUSES] },
          requested: { type: 'integer', description: 'number of types requested' },
          types: requestCheckAnswerSchema.properties.types,
          error: { type: 'string', description: 'why nothing was requested: not_found, unavailable (retry), failed' },
        },
      },
    },
  },
} as const;

/** Answers every route may give besides its success: 400 invalid, 404 not found, 409 conflict, … */
export const errorResponses = {
  '4xx': {
    description: '{ error: { code, message, field? } }: 400 invalid, 401 no or wrong token, 404 not found, 409 conflict, 413 too large, 415 wrong content type',
    ...errorSchema,
  },
  '5xx': {
    description: '500 internal; 503 not done, try again after the Retry-After header (seconds): the orchestration or the database is unavailable or busy',
    ...errorSchema,
  },
} as const;

export const noContent = { type: 'null', description: 'no content' } as const;
