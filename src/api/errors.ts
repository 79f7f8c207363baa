/**
 * One error shape for every answer: `{ error: { code, message, field? } }`.
 * Domain errors, JSON-schema failures, request-check validation and Fastify's own errors
 * (bad JSON, body too large, wrong content type) are all mapped here.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { isDomainError, type DomainErrorCode } from '../domain/errors.js';
import { shown } from '../domain/validate.js';
import { ID_PATTERN, ID_RULE } from '../workflow-safe/ids.js';
import { REQUEST_CHECK_REJECTED, RequestCheckInvalid, type RequestCheckRejection } from '../workflow-safe/requestCheckValidation.js';
import { tryAgain } from './tryAgain.js';

export type ApiErrorCode = DomainErrorCode | 'unauthorized' | 'unavailable' | 'payload_too_large' | 'unsupported_media_type' | 'internal';

export interface ErrorBody {
  readonly error: { readonly code: ApiErrorCode; readonly message: string; readonly field?: string };
}

/** An error the API raises itself with its status code. */
export class ApiError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: ApiErrorCode,
    message: string,
    readonly field?: string,
    /** Seconds a client should wait before trying again (sent as `Retry-After`; every 503 has one). */
    readonly retryAfterSec?: number,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** `Retry-After` of a 503 that did not say how long. */
export const DEFAULT_RETRY_AFTER_SEC = 5;

const STATUS_OF: Readonly<Record<DomainErrorCode, number>> = { not_found: 404, conflict: 409, invalid: 400 };

export function errorBody(code: ApiErrorCode, message: string, field?: string): ErrorBody {
  return { error: field === undefined ? { code, message } : { code, message, field } };
}

interface AjvError {
  readonly instancePath: string;
  readonly keyword: string;
  readonly message?: string;
  readonly params: Record<string, unknown>;
}

/** `/groups/1/qps` → `groups[1].qps`, the spelling DomainError uses. */
export function fieldOfPointer(pointer: string): string {
  return pointer
    .split('/')
    .filter((part) => part !== '')
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((path, part) => (/^\d+$/.test(part) ? `${path}[${part}]` : path === '' ? part : `${path}.${part}`), '');
}

/** The field an Ajv error is about: missing and unknown properties name the property itself. */
export function fieldOfAjvError(error: AjvError, context: string): string {
  const base = fieldOfPointer(error.instancePath);
  const property = error.params.missingProperty ?? error.params.additionalProperty;
  const leaf = typeof property === 'string' ? (base === '' ? property : `${base}.${property}`) : base;
  // A whole-body or whole-query error names the part of the request.
  return leaf === '' ? context : leaf;
}

/** The value at a JSON pointer of the request part Ajv checked (what the client sent), if any. */
function valueAt(request: FastifyRequest, context: string, pointer: string): unknown {
  const parts: Record<string, unknown> = { body: request.body, params: request.params, querystring: request.query, headers: request.headers };
  let value = parts[context];
  for (const part of pointer.split('/').filter((segment) => segment !== '')) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Record<string, unknown>)[part.replace(/~1/g, '/').replace(/~0/g, '~')];
  }
  return value;
}

function validationBody(error: FastifyError, request: FastifyRequest): ErrorBody {
  const first = (error.validation ?? [])[0] as AjvError | undefined;
  const context = error.validationContext ?? 'body';
  if (!first) return errorBody('invalid', error.message, context);
  const field = fieldOfAjvError(first, context);
  const allowed = first.params.allowedValues;
  const reason =
    first.keyword === 'additionalProperties'
      ? 'is not a known field'
      : first.keyword === 'required'
        ? 'is required'
        : // Name the allowed values: "must be equal to one of the allowed values" alone does not help.
          first.keyword === 'enum' && Array.isArray(allowed)
          ? `must be one of ${allowed.map((value) => JSON.stringify(value)).join(', ')}`
          : // The id pattern spelt out is unreadable: say what it admits.
            first.keyword === 'pattern' && first.params.pattern === ID_PATTERN
            ? `must be ${ID_RULE}`
            : (first.message ?? 'is invalid');
  // A value that is there but wrong is named; a missing or unknown field has none worth showing.
  const value = first.keyword === 'required' || first.keyword === 'additionalProperties' ? undefined : valueAt(request, context, first.instancePath);
  const got = value === undefined || typeof value === 'object' ? '' : `, got ${shown(value)}`;
  return errorBody('invalid', `${field} ${reason}${got}`, field);
}

function unavailable(reply: FastifyReply, message: string, retryAfterSec = DEFAULT_RETRY_AFTER_SEC): FastifyReply {
  return reply
    .status(503)
    .header('retry-after', String(Math.max(1, Math.ceil(retryAfterSec))))
    .send(errorBody('unavailable', message));
}

/** Fastify error codes whose message is safe and useful to pass on. */
const FASTIFY_CLIENT_ERRORS: Readonly<Record<string, { status: number; code: ApiErrorCode; field?: string }>> = {
  FST_ERR_CTP_INVALID_JSON_BODY: { status: 400, code: 'invalid', field: 'body' },
  FST_ERR_CTP_EMPTY_JSON_BODY: { status: 400, code: 'invalid', field: 'body' },
  FST_ERR_CTP_BODY_TOO_LARGE: { status: 413, code: 'payload_too_large', field: 'body' },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { status: 415, code: 'unsupported_media_type', field: 'content-type' },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { status: 400, code: 'invalid', field: 'content-length' },
};

/**
 * A request-check the scheduler's activity rejected for good (the failure the update ends with
 * carries it as its cause, an ApplicationFailure of type request_check_rejected): the caller's
 * input was wrong, whatever the API's own validation let through.
 */
function rejectedRequestCheck(error: unknown): (RequestCheckRejection & { message: string }) | undefined {
  for (let cause: unknown = error, depth = 0; cause instanceof Error && depth < 5; cause = cause.cause, depth += 1) {
    const failure = cause as Error & { type?: unknown; details?: unknown };
    if (failure.type !== REQUEST_CHECK_REJECTED) continue;
    const [details] = Array.isArray(failure.details) ? (failure.details as Partial<RequestCheckRejection>[]) : [];
    const code = details?.code === 'not_found' ? 'not_found' : 'invalid';
    return { code, message: failure.message, ...(typeof details?.field === 'string' ? { field: details.field } : {}) };
  }
  return undefined;
}

export function handleError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (error.validation) return reply.status(400).send(validationBody(error, request));
  if (error instanceof ApiError) {
    if (error.statusCode === 503) return unavailable(reply, error.message, error.retryAfterSec);
    return reply.status(error.statusCode).send(errorBody(error.code, error.message, error.field));
  }
  if (isDomainError(error)) return reply.status(STATUS_OF[error.code]).send(errorBody(error.code, error.message, error.field));
  if (error instanceof RequestCheckInvalid) return reply.status(400).send(errorBody('invalid', error.message, error.field));
  const rejection = rejectedRequestCheck(error);
  if (rejection) return reply.status(STATUS_OF[rejection.code]).send(errorBody(rejection.code, rejection.message, rejection.field));
  const known = FASTIFY_CLIENT_ERRORS[error.code];
  if (known) return reply.status(known.status).send(errorBody(known.code, error.message, known.field));
  if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) {
    return reply.status(error.statusCode).send(errorBody('invalid', error.message));
  }
  // Not done, and not wrong either: the orchestration or the database cannot take it right now.
  const again = tryAgain(error);
  if (again !== undefined) {
    request.log.warn({ err: error }, 'request could not be served now; answered 503');
    return unavailable(reply, `not done: ${again.reason}; try again in ${again.afterSec} s`, again.afterSec);
  }
  // Unexpected: log with the stack, answer without internals.
  request.log.error({ err: error }, 'request failed');
  return reply.status(500).send(errorBody('internal', 'internal error; see the server log'));
}
