/**
 * One error shape for every answer: `{ error: { code, message, field? } }`.
 * Domain errors, JSON-schema failures, request-check validation and Fastify's own errors
 * (bad JSON, body too large, wrong content type) are all mapped here.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { isDomainError, type DomainErrorCode } from '../domain/errors.js';
import { RequestCheckInvalid } from '../common/requestCheckValidation.js';

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
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

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

function validationBody(error: FastifyError): ErrorBody {
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
          : (first.message ?? 'is invalid');
  return errorBody('invalid', `${field} ${reason}`, field);
}

/** Fastify error codes whose message is safe and useful to pass on. */
const FASTIFY_CLIENT_ERRORS: Readonly<Record<string, { status: number; code: ApiErrorCode; field?: string }>> = {
  FST_ERR_CTP_INVALID_JSON_BODY: { status: 400, code: 'invalid', field: 'body' },
  FST_ERR_CTP_EMPTY_JSON_BODY: { status: 400, code: 'invalid', field: 'body' },
  FST_ERR_CTP_BODY_TOO_LARGE: { status: 413, code: 'payload_too_large', field: 'body' },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { status: 415, code: 'unsupported_media_type', field: 'content-type' },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { status: 400, code: 'invalid', field: 'content-length' },
};

export function handleError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (error.validation) return reply.status(400).send(validationBody(error));
  if (error instanceof ApiError) return reply.status(error.statusCode).send(errorBody(error.code, error.message, error.field));
  if (isDomainError(error)) return reply.status(STATUS_OF[error.code]).send(errorBody(error.code, error.message, error.field));
  if (error instanceof RequestCheckInvalid) return reply.status(400).send(errorBody('invalid', error.message, error.field));
  const known = FASTIFY_CLIENT_ERRORS[error.code];
  if (known) return reply.status(known.status).send(errorBody(known.code, error.message, known.field));
  if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) {
    return reply.status(error.statusCode).send(errorBody('invalid', error.message));
  }
  // Unexpected: log with the stack, answer without internals.
  request.log.error({ err: error }, 'request failed');
  return reply.status(500).send(errorBody('internal', 'internal error; see the server log'));
}
